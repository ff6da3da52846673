package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// accessRig is an app with every optional part configured (so every route
// is registered), a signed-in browser per role and a key per scope.
type accessRig struct {
	app    *fiber.App
	store  *db.Store
	ctx    context.Context
	broker *handlers.Broker // the test delivers events to it
	people map[auth.Role]*dashBundle
	emails map[auth.Role]string
	keys   map[auth.Scope]string // secrets
	keyIDs map[auth.Scope]uuid.UUID
}

const rolePassword = "a long enough password"

func accessSetup(t *testing.T) *accessRig {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	broker := handlers.NewBroker(1000)
	app := handlers.New(handlers.Config{
		APIKey: apiKey, Dashboard: store, Audit: store, Access: store, Alerts: store, Logs: nopLogs{}, Broker: broker,
		Metrics: http.NotFoundHandler(), MailURL: "http://localhost:8025", BaseContext: ctx,
		Work:      &handlers.WorkConfig{Store: store},
		Benchmark: func(context.Context, int, string) ([]domain.BenchResult, error) { return nil, nil },
		Session:   handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")},
	}, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := &accessRig{app: app, store: store, ctx: ctx, broker: broker, people: map[auth.Role]*dashBundle{}, emails: map[auth.Role]string{},
		keys: map[auth.Scope]string{}, keyIDs: map[auth.Scope]uuid.UUID{}}
	for _, role := range auth.Roles {
		email := string(role) + "@example.com"
		_, err := store.AddUser(ctx, email, rolePassword, role)
		require.NoError(t, err)
		r.emails[role] = email
		r.people[role] = r.signIn(t, email)
	}
	for _, sc := range auth.Scopes {
		k, secret, err := store.CreateAPIKey(ctx, auth.KeySpec{Name: "svc-" + string(sc), Scopes: []auth.Scope{sc}}, "test")
		require.NoError(t, err)
		r.keys[sc], r.keyIDs[sc] = secret, k.ID
	}
	return r
}

func (r *accessRig) signIn(t *testing.T, email string) *dashBundle {
	t.Helper()
	b := &dashBundle{app: r.app, store: r.store, ctx: r.ctx, cookies: map[string]string{}}
	b.login(t, email, rolePassword, http.StatusSeeOther)
	return b
}

// apiCall makes an API request with a key; a streaming route that is let in
// keeps the response open, which counts as let in (status 200).
func apiCall(t *testing.T, app *fiber.App, key, method, path, body string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	timeout := 30 * time.Second
	if strings.HasSuffix(path, "/events") {
		timeout = 500 * time.Millisecond
	}
	resp, err := app.Test(req, int(timeout/time.Millisecond))
	if err != nil && strings.Contains(err.Error(), "timeout") {
		return response{status: http.StatusOK}
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// dashCall makes a dashboard request as b would from its page: GETs as page
// loads, everything else as HTMX with the CSRF token. A stream that is let
// in counts as 200.
func dashCall(t *testing.T, b *dashBundle, method, path string, form url.Values) page {
	t.Helper()
	if path == "/events" {
		req := httptest.NewRequest(method, path, nil)
		for k, v := range b.cookies {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
		resp, err := b.app.Test(req, 500)
		if err != nil && strings.Contains(err.Error(), "timeout") {
			return page{status: http.StatusOK}
		}
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	}
	if method == http.MethodGet {
		return b.request(t, method, path, nil)
	}
	if form == nil {
		form = url.Values{}
	}
	return b.hx(t, method, path, form, "main")
}

// concrete fills a route's parameters: a job or key id that does not exist
// (the check comes before the lookup), the default queue.
func concrete(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") {
			if p == ":name" || p == ":queue" {
				parts[i] = "default"
			} else {
				parts[i] = uuid.NewString()
			}
		}
	}
	return strings.Join(parts, "/")
}

type route struct{ method, path string }

func guardedRoutes(app *fiber.App) []route {
	var out []route
	seen := map[string]bool{}
	for _, r := range app.GetRoutes(true) {
		if r.Method == http.MethodHead || r.Method == "USE" || handlers.IsPublicRoute(r.Method, r.Path) || seen[r.Method+" "+r.Path] {
			continue
		}
		seen[r.Method+" "+r.Path] = true
		out = append(out, route{r.Method, r.Path})
	}
	// Signing out ends the session the rest of the walk uses: last.
	slices.SortStableFunc(out, func(a, b route) int {
		la, lb := a.path == "/logout", b.path == "/logout"
		switch {
		case la && !lb:
			return 1
		case lb && !la:
			return -1
		}
		return 0
	})
	return out
}

// TestEveryRouteHasAnAccessRule walks every registered route: each is
// public or in the access table, and every table entry is a route. A route
// added without an entry fails here (and is refused to everybody).
func TestEveryRouteHasAnAccessRule(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	registered := map[string]bool{}
	var missing []string
	for _, rt := range r.app.GetRoutes(true) {
		if rt.Method == "USE" {
			continue
		}
		method := rt.Method
		if method == http.MethodHead {
			method = http.MethodGet
		}
		registered[method+" "+rt.Path] = true
		if handlers.IsPublicRoute(rt.Method, rt.Path) {
			continue
		}
		if _, _, _, ok := handlers.AccessNeed(rt.Method, rt.Path); !ok {
			missing = append(missing, method+" "+rt.Path)
		}
	}
	slices.Sort(missing)
	require.Empty(t, slices.Compact(missing), "routes without an entry in accessTable (handlers/access.go): add one each")
	var stale []string
	for _, k := range handlers.AccessTableKeys() {
		if !registered[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	require.Empty(t, stale, "accessTable entries that are no route")
}

// TestAccessMatrix sends every guarded route as every role (dashboard) or
// with a key of every scope and the bootstrap key (API), and checks that
// exactly what the table grants gets past the check (and then does not
// fail with a 5xx), and that refusals say what was missing. Every route
// that is not public is also sent with no credentials at all and must be
// refused: a table entry says nothing about a route registered outside
// the guarded routers, which would let anybody in.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	for _, rt := range guardedRoutes(r.app) {
		need, field, raise, ok := handlers.AccessNeed(rt.method, rt.path)
		require.True(t, ok, "%s %s has no rule", rt.method, rt.path)
		path := concrete(rt.path)
		require.NoError(t, refusesStrangers(r.app, rt.method, path))
		if strings.HasPrefix(rt.path, "/api/v1/") {
			body := ""
			if rt.method != http.MethodGet && rt.method != http.MethodDelete {
				body = "{}"
			}
			for _, sc := range auth.Scopes {
				res := apiCall(t, r.app, r.keys[sc], rt.method, path, body)
				want := auth.Grants([]auth.Scope{sc}, need)
				checkAPI(t, res, want, need, "%s %s with a %s key", rt.method, rt.path, sc)
			}
			res := apiCall(t, r.app, apiKey, rt.method, path, body)
			checkAPI(t, res, true, need, "%s %s with the bootstrap key", rt.method, rt.path)
			if field != "" {
				for v, raised := range raise {
					q := path + "?" + field + "=" + v
					for _, sc := range auth.Scopes {
						res := apiCall(t, r.app, r.keys[sc], rt.method, q, body)
						checkAPI(t, res, auth.Grants([]auth.Scope{sc}, raised), raised, "%s %s with a %s key", rt.method, q, sc)
					}
				}
			}
			continue
		}
		for _, role := range auth.Roles {
			p := dashCall(t, r.people[role], rt.method, path, nil)
			checkDash(t, p, auth.Grants(role.Scopes(), need), "%s %s as %s", rt.method, rt.path, role)
			if field != "" {
				for v, raised := range raise {
					p := dashCall(t, r.people[role], rt.method, path, url.Values{field: {v}})
					checkDash(t, p, auth.Grants(role.Scopes(), raised), "%s %s %s=%s as %s", rt.method, rt.path, field, v, role)
				}
			}
		}
	}
}

// refusesStrangers sends method path with no credentials at all (no
// session cookie, no API key) and says what is wrong unless it is refused:
// 401 or 403, or a redirect to the sign-in page.
func refusesStrangers(app *fiber.App, method, path string) error {
	req := httptest.NewRequest(method, path, nil)
	resp, err := app.Test(req, 500)
	if err != nil {
		if strings.Contains(err.Error(), "timeout") {
			return fmt.Errorf("%s %s without credentials: still answering after 500 ms (a stream let in?)", method, path)
		}
		return fmt.Errorf("%s %s without credentials: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		return nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400 && strings.HasPrefix(resp.Header.Get("Location"), "/login"):
		return nil
	}
	return fmt.Errorf("%s %s without credentials answered %d (Location %q), not a refusal: is the route registered outside the guarded routers? %.200s",
		method, path, resp.StatusCode, resp.Header.Get("Location"), body)
}

// TestStrangersCheckCatchesAnUnguardedRoute: a route registered on the
// app itself, outside the guarded routers, is open to anybody whatever
// accessTable says; refusesStrangers (the matrix's check) says so, while
// the guarded routes pass it.
func TestStrangersCheckCatchesAnUnguardedRoute(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	r.app.Get("/sneaky", func(c *fiber.Ctx) error { return c.SendString("anybody gets this") })
	r.app.Post("/sneaky/:id", func(c *fiber.Ctx) error { return c.SendString("anybody gets this") })
	require.ErrorContains(t, refusesStrangers(r.app, http.MethodGet, "/sneaky"), "answered 200")
	require.ErrorContains(t, refusesStrangers(r.app, http.MethodPost, "/sneaky/"+uuid.NewString()), "answered 200")
	for _, ok := range []struct{ method, path string }{{"GET", "/jobs"}, {"POST", "/jobs/bulk"}, {"GET", "/events"}, {"GET", "/api/v1/jobs"}, {"GET", "/api/v1/sse/events"}} {
		require.NoError(t, refusesStrangers(r.app, ok.method, ok.path))
	}
}

func checkAPI(t *testing.T, res response, allowed bool, need auth.Scope, msg string, args ...any) {
	t.Helper()
	if allowed {
		require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, res.status, append([]any{msg + ": %s"}, append(args, res.body)...)...)
		require.Less(t, res.status, 500, append([]any{msg + ": let in, then failed: %s"}, append(args, res.body)...)...)
		return
	}
	require.Equal(t, http.StatusForbidden, res.status, append([]any{msg + ": %s"}, append(args, res.body)...)...)
	var body struct {
		Error struct{ Code, Message, Scope string }
	}
	require.NoError(t, json.Unmarshal(res.body, &body))
	require.Equal(t, "forbidden", body.Error.Code)
	require.Equal(t, string(need), body.Error.Scope, append([]any{msg}, args...)...)
	require.Contains(t, body.Error.Message, string(need))
}

func checkDash(t *testing.T, p page, allowed bool, msg string, args ...any) {
	t.Helper()
	if allowed {
		require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, p.status, append([]any{msg + ": %s"}, append(args, p.body)...)...)
		require.Less(t, p.status, 500, append([]any{msg + ": let in, then failed: %s"}, append(args, p.body)...)...)
		require.False(t, strings.HasPrefix(p.header.Get("Location"), "/login?next="), append([]any{msg + ": sent to sign in"}, args...)...)
		return
	}
	require.Equal(t, http.StatusForbidden, p.status, append([]any{msg + ": %s"}, append(args, p.body)...)...)
	refusal := p.body + p.header.Get("HX-Trigger")
	require.Contains(t, refusal, "cannot do this", append([]any{msg}, args...)...)
}

func enqueueDead(t *testing.T, r *accessRig) uuid.UUID {
	t.Helper()
	res, err := r.store.Enqueue(r.ctx, jobs.EnqueueParams{Type: "noop", Payload: json.RawMessage(`{}`), Queue: "default"})
	require.NoError(t, err)
	id := res[0].Job.ID
	_, err = r.store.Pool().Exec(r.ctx, `UPDATE jobs SET status = 'dead_letter', finished_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	return id
}
