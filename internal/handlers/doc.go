// Package handlers is Flint's HTTP surface on Fiber: the JSON API under
// /api/v1 (X-API-Key) with its SSE event stream, the pull API of remote
// workers, health endpoints and metrics, and the dashboard: pages, HTMX
// partials, actions, sessions and CSRF, and its one live stream per
// browser.
//
// A caller builds the app with New(Config, Store, *jobs.Registry, logger),
// serves it with app.Listener and stops it with app.ShutdownWithTimeout.
// The loops some routes rely on (API key use, the remote workers' poll,
// the dashboard's topics) start in New and stop with Config.BaseContext or
// the app's shutdown, which waits for them (background.go). In a Flint
// process the caller is app/ (process.go, startHTTP).
//
// # Where to start reading
//
//   - routes.go: New, and every route of the API in one list per area;
//     routes_html.go the same for the dashboard. Start here to find which
//     handler serves a path.
//   - config.go: Config, what each field's zero value means, and the Fiber
//     configuration. server.go: the server every handler hangs off, built
//     from Config.
//   - store.go: Store, what the API needs from storage, one small interface
//     per area (StatusStore, JobStore, JobActionStore, DLQStore,
//     QueueStore, ScheduleStore, SettingsStore). The other areas name
//     theirs next to their handlers: DashboardStore (html.go), AlertStore
//     (api_alerts.go), WorkStore (work.go), AccessStore (apikey_auth.go),
//     SessionStore (session.go), LogSource (logs.go), AuditStore
//     (audit.go). *db.Store implements all of them.
//   - access.go: accessTable, who may use which route. authorize.go checks
//     it on every guarded route (and answers the templates' "may this
//     caller use that control?"); guarded.go is the router that cannot
//     skip the check; apikey_auth.go and session.go say who the caller is.
//   - errors.go, decode.go, render.go: how errors become responses, how
//     request bodies are read, how pages are written.
//   - api_*.go: one file per API area: api_enqueue.go (jobs, batches),
//     api_workflows.go, api_jobs.go (reading jobs and acting on them),
//     api_joblog.go, api_dlq.go (the dead-letter queue and the bin),
//     api_queues.go (queues, flow control, push), api_recurring.go,
//     api_settings.go, api_status.go (health, readiness, stats),
//     api_alerts.go and api_alert_rules.go, api_keys.go; the pull API in
//     work.go (its configuration and limits), api_workers.go
//     (registration), api_work_claim.go (claims, heartbeats) and
//     api_work_finish.go (outcomes, job logs), with workhub.go holding the
//     long polls. actions.go is the one path the API and the dashboard
//     share for acting on a job or a series.
//   - html_*.go: the dashboard's pages, one file per page or pair of
//     pages (html_recurring.go holds the workers page too, html_bench.go
//     the benchmark's API route too; html.go what they share); live.go
//     the dashboard's live stream; sse.go and broker.go
//     the API's event stream; logs.go and audit.go the log and audit
//     trail, API and page together.
//
// # Invariants
//
// Who may use which route is one table, accessTable in access.go: every
// guarded route runs authorize first, which refuses what the caller's role
// or key scopes do not grant, and refuses a route missing from the table to
// everybody. A route added without its line in the table fails
// TestEveryRouteHasAnAccessRule; an API route also needs its operation in
// openapi.json (TestOpenAPIMatchesRoutes).
//
// Errors become responses in one place, ErrorHandler in errors.go: a
// *jobs.ValidationError is 422 (400 for malformed JSON), domain.ErrNotFound
// 404, domain.ErrInvalidTransition 409, an error meaning the database is
// away (unreachable, failing over, read-only: unavailable.go) 503
// database_unavailable with Retry-After, or for the dashboard a page with a
// banner, and anything unexpected 500 with a generic message and the
// details in the log. A 500 is always a bug.
//
// handlers imports jobs, auth, logs, views and static, never db: the
// storage it needs is the interfaces above. It holds no SQL and no
// business rules.
package handlers
