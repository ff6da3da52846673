// Package handlers is Flint's HTTP surface on Fiber: the JSON API under
// /api/v1 (X-API-Key) with its SSE event stream, health endpoints and
// metrics, and the dashboard: pages, HTMX partials, actions, sessions and
// CSRF (routes_html.go), and its one live stream per browser (live.go).
//
// Who may use which route is one table, accessTable in access.go: every
// guarded route runs authorize first, which refuses what the caller's role
// or key scopes do not grant, and refuses a route missing from the table to
// everybody.
//
// Errors become responses in one place, ErrorHandler in errors.go: a
// *jobs.ValidationError is 422 (400 for malformed JSON), jobs.ErrNotFound
// 404, jobs.ErrInvalidTransition 409, anything unexpected 500 with a generic
// message and the details in the log. A 5xx is always a bug.
//
// handlers imports jobs (and views); the store it needs is an interface that
// *db.Store satisfies. It holds no SQL and no business rules.
package handlers
