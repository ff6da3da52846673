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
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"flint/auth"
	"flint/db"
	"flint/db/dbtest"
	"flint/handlers"
	"flint/jobs"
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
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
	broker := handlers.NewBroker(1000)
	app := handlers.New(handlers.Config{
		APIKey: apiKey, Dashboard: store, Audit: store, Access: store, Alerts: store, Logs: nopLogs{}, Broker: broker,
		Metrics: http.NotFoundHandler(), MailURL: "http://localhost:8025", BaseContext: ctx,
		Benchmark: func(context.Context, int, string) ([]jobs.BenchResult, error) { return nil, nil },
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
		k, secret, err := store.CreateAPIKey(ctx, "svc-"+string(sc), []auth.Scope{sc}, "test")
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

// TestAccessKeyRoutes states, without reading the table, what a handful of
// routes must allow and refuse; a wrong table entry fails here even though
// the matrix agrees with the table.
func TestAccessKeyRoutes(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	dead := enqueueDead(t, r)
	jobPath := "/api/v1/jobs/" + dead.String()

	api := []struct {
		name         string
		scope        auth.Scope
		method, path string
		body         string
		refusedFor   string // "" when let in
	}{
		{"enqueue key enqueues", auth.ScopeEnqueue, "POST", "/api/v1/jobs", `{"type":"noop"}`, ""},
		{"enqueue key cannot list", auth.ScopeEnqueue, "GET", "/api/v1/jobs", "", "read"},
		{"enqueue key cannot retry", auth.ScopeEnqueue, "POST", jobPath + "/retry", "", "operate"},
		{"read key lists", auth.ScopeRead, "GET", "/api/v1/jobs", "", ""},
		{"read key cannot enqueue", auth.ScopeRead, "POST", "/api/v1/jobs", `{"type":"noop"}`, "enqueue"},
		{"read key cannot retry", auth.ScopeRead, "POST", jobPath + "/retry", "", "operate"},
		{"read key cannot read keys", auth.ScopeRead, "GET", "/api/v1/keys", "", "admin"},
		{"operate key reads", auth.ScopeOperate, "GET", "/api/v1/dlq", "", ""},
		{"operate key cannot enqueue", auth.ScopeOperate, "POST", "/api/v1/jobs", `{"type":"noop"}`, "enqueue"},
		{"operate key cannot purge", auth.ScopeOperate, "DELETE", jobPath + "?purge=true", "", "admin"},
		{"operate key cannot change settings", auth.ScopeOperate, "PATCH", "/api/v1/settings", `{}`, "admin"},
		{"operate key cannot make keys", auth.ScopeOperate, "POST", "/api/v1/keys", `{"name":"x","scopes":["admin"]}`, "admin"},
		{"operate key retries", auth.ScopeOperate, "POST", jobPath + "/retry", "", ""},
		{"operate key bins", auth.ScopeOperate, "DELETE", jobPath, "", ""},
		{"admin key purges", auth.ScopeAdmin, "DELETE", jobPath + "?purge=true", "", ""},
		{"admin key changes settings", auth.ScopeAdmin, "PATCH", "/api/v1/settings", `{"dlq_threshold": 7}`, ""},
		{"admin key lists keys", auth.ScopeAdmin, "GET", "/api/v1/keys", "", ""},
	}
	for _, tc := range api {
		res := apiCall(t, r.app, r.keys[tc.scope], tc.method, tc.path, tc.body)
		if tc.refusedFor == "" {
			require.Less(t, res.status, 300, "%s: %s", tc.name, res.body)
			continue
		}
		require.Equal(t, http.StatusForbidden, res.status, "%s: %s", tc.name, res.body)
		require.Equal(t, tc.refusedFor, res.json(t)["error"].(map[string]any)["scope"], tc.name)
	}

	dash := []struct {
		name         string
		role         auth.Role
		method, path string
		form         url.Values
		refused      bool
	}{
		{"viewer reads the DLQ", auth.RoleViewer, "GET", "/dlq", nil, false},
		{"viewer reads settings", auth.RoleViewer, "GET", "/settings", nil, false},
		{"viewer cannot retry", auth.RoleViewer, "POST", "/jobs/" + uuid.NewString() + "/retry", nil, true},
		{"viewer cannot save settings", auth.RoleViewer, "POST", "/settings", url.Values{}, true},
		{"viewer cannot create jobs", auth.RoleViewer, "GET", "/jobs/new", nil, true},
		{"viewer cannot see users", auth.RoleViewer, "GET", "/users", nil, true},
		{"viewer changes their password page", auth.RoleViewer, "GET", "/account", nil, false},
		{"operator retries", auth.RoleOperator, "POST", "/dlq/bulk", url.Values{"action": {"retry"}, "ids": {dead.String()}}, false},
		{"operator cannot purge in bulk", auth.RoleOperator, "POST", "/bin/bulk", url.Values{"action": {"purge"}, "ids": {dead.String()}}, true},
		{"operator restores in bulk", auth.RoleOperator, "POST", "/bin/bulk", url.Values{"action": {"restore"}, "ids": {dead.String()}}, false},
		{"operator cannot purge one", auth.RoleOperator, "POST", "/jobs/" + dead.String() + "/purge", nil, true},
		{"operator cannot save settings", auth.RoleOperator, "POST", "/settings", url.Values{}, true},
		{"operator cannot see keys", auth.RoleOperator, "GET", "/keys", nil, true},
		{"operator cannot delete a series", auth.RoleOperator, "POST", "/recurring/" + uuid.NewString() + "/delete", nil, true},
		{"admin sees keys", auth.RoleAdmin, "GET", "/keys", nil, false},
		{"admin sees users", auth.RoleAdmin, "GET", "/users", nil, false},
		{"admin purges", auth.RoleAdmin, "POST", "/bin/bulk", url.Values{"action": {"purge"}, "ids": {dead.String()}}, false},
	}
	for _, tc := range dash {
		p := dashCall(t, r.people[tc.role], tc.method, tc.path, tc.form)
		if tc.refused {
			require.Equal(t, http.StatusForbidden, p.status, tc.name)
			continue
		}
		require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, p.status, "%s: %s", tc.name, p.body)
		require.False(t, strings.HasPrefix(p.header.Get("Location"), "/login?next="), tc.name)
	}
	// A refusal names the role that is missing.
	p := dashCall(t, r.people[auth.RoleViewer], "POST", "/bin/bulk", url.Values{"action": {"purge"}})
	require.Contains(t, p.header.Get("HX-Trigger"), "Your role (viewer) cannot do this; it needs admin")
	p = dashCall(t, r.people[auth.RoleOperator], "GET", "/keys", nil)
	require.Contains(t, p.body, "Your role (operator) cannot do this; it needs admin")
	// A person's session does not open the API, nor a key the dashboard.
	res := apiCall(t, r.app, "", "GET", "/api/v1/jobs", "")
	require.Equal(t, http.StatusUnauthorized, res.status)
	req := httptest.NewRequest("GET", "/jobs", nil)
	req.Header.Set("X-API-Key", r.keys[auth.ScopeAdmin])
	resp, err := r.app.Test(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
}

var regexpSecret = regexp.MustCompile(`<code class="secret">([^<]+)</code>`)

func enqueueDead(t *testing.T, r *accessRig) uuid.UUID {
	t.Helper()
	res, err := r.store.Enqueue(r.ctx, jobs.EnqueueParams{Type: "noop", Payload: json.RawMessage(`{}`), Queue: "default"})
	require.NoError(t, err)
	id := res[0].Job.ID
	_, err = r.store.Pool().Exec(r.ctx, `UPDATE jobs SET status = 'dead_letter', finished_at = now() WHERE id = $1`, id)
	require.NoError(t, err)
	return id
}

// TestKeyLifecycle: a key created over the API works at once, shows its
// secret only at creation, is refused on the request right after it is
// revoked, and during a rotation both secrets work until the window
// closes.
func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	res := apiCall(t, r.app, apiKey, "POST", "/api/v1/keys", `{"name":"billing","scopes":["enqueue","read"]}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	created := res.json(t)
	secret := created["secret"].(string)
	id := created["id"].(string)
	require.True(t, strings.HasPrefix(secret, "flint_"))
	require.Equal(t, []any{"enqueue", "read"}, created["scopes"])

	// Bad input says what to fix.
	for body, field := range map[string]string{
		`{"name":"billing","scopes":["read"]}`:    "name",
		`{"name":"x y","scopes":["read"]}`:        "name",
		`{"name":"other","scopes":[]}`:            "scopes",
		`{"name":"other","scopes":["superuser"]}`: "scopes",
	} {
		res := apiCall(t, r.app, apiKey, "POST", "/api/v1/keys", body)
		require.Equal(t, http.StatusUnprocessableEntity, res.status, body)
		require.Equal(t, field, res.json(t)["error"].(map[string]any)["field"], body)
	}

	require.Equal(t, http.StatusBadRequest, apiCall(t, r.app, apiKey, "POST", "/api/v1/keys", `{"name":`).status)
	require.Equal(t, http.StatusUnprocessableEntity, apiCall(t, r.app, apiKey, "POST", "/api/v1/keys", `{"name":"z","scopes":["read"],"ttl":1}`).status)
	res = apiCall(t, r.app, apiKey, "DELETE", "/api/v1/keys/not-a-uuid", "")
	require.Equal(t, http.StatusBadRequest, res.status)
	require.Equal(t, "id", res.json(t)["error"].(map[string]any)["field"])
	require.Equal(t, http.StatusOK, apiCall(t, r.app, secret, "GET", "/api/v1/jobs", "").status)
	list := apiCall(t, r.app, apiKey, "GET", "/api/v1/keys", "")
	require.Equal(t, http.StatusOK, list.status)
	require.NotContains(t, string(list.body), secret, "the secret is shown once")
	var stored string
	require.NoError(t, r.store.Pool().QueryRow(r.ctx, `SELECT hash FROM api_keys WHERE id = $1`, id).Scan(&stored))
	require.Equal(t, auth.HashToken(secret), stored, "only the hash is kept")

	// Rotation: both work inside the window.
	rot := apiCall(t, r.app, apiKey, "POST", "/api/v1/keys/"+id+"/rotate", `{"window_seconds":3600}`)
	require.Equal(t, http.StatusOK, rot.status, string(rot.body))
	newSecret := rot.json(t)["secret"].(string)
	require.NotEqual(t, secret, newSecret)
	require.NotNil(t, rot.json(t)["previous_expires_at"])
	require.Equal(t, http.StatusOK, apiCall(t, r.app, secret, "GET", "/api/v1/jobs", "").status, "old secret inside the window")
	require.Equal(t, http.StatusOK, apiCall(t, r.app, newSecret, "GET", "/api/v1/jobs", "").status, "new secret")
	// The window closes (as an hour passing would leave it).
	_, err := r.store.Pool().Exec(r.ctx, `UPDATE api_keys SET prev_expires_at = now() - interval '1 second' WHERE id = $1`, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, apiCall(t, r.app, secret, "GET", "/api/v1/jobs", "").status, "old secret after the window")
	require.Equal(t, http.StatusOK, apiCall(t, r.app, newSecret, "GET", "/api/v1/jobs", "").status)
	// A rotation with no window ends the old secret at once.
	rot = apiCall(t, r.app, apiKey, "POST", "/api/v1/keys/"+id+"/rotate", `{"window_seconds":0}`)
	require.Equal(t, http.StatusOK, rot.status)
	third := rot.json(t)["secret"].(string)
	require.Equal(t, http.StatusUnauthorized, apiCall(t, r.app, newSecret, "GET", "/api/v1/jobs", "").status)
	require.Equal(t, http.StatusOK, apiCall(t, r.app, third, "GET", "/api/v1/jobs", "").status)
	require.Equal(t, http.StatusUnprocessableEntity, apiCall(t, r.app, apiKey, "POST", "/api/v1/keys/"+id+"/rotate", `{"window_seconds":-1}`).status)

	// Revocation applies to the very next request.
	require.Equal(t, http.StatusOK, apiCall(t, r.app, apiKey, "DELETE", "/api/v1/keys/"+id, "").status)
	res = apiCall(t, r.app, third, "GET", "/api/v1/jobs", "")
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Contains(t, string(res.body), "revoked")
	require.Equal(t, http.StatusUnprocessableEntity, apiCall(t, r.app, apiKey, "POST", "/api/v1/keys/"+id+"/rotate", "").status, "a revoked key cannot be rotated")
	require.Equal(t, http.StatusNotFound, apiCall(t, r.app, apiKey, "DELETE", "/api/v1/keys/"+uuid.NewString(), "").status)

	// From the dashboard too: an admin revokes, the key's next call fails.
	secret2 := r.keys[auth.ScopeRead]
	require.Equal(t, http.StatusOK, apiCall(t, r.app, secret2, "GET", "/api/v1/jobs", "").status)
	p := dashCall(t, r.people[auth.RoleAdmin], "POST", "/keys/"+r.keyIDs[auth.ScopeRead].String()+"/revoke", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, http.StatusUnauthorized, apiCall(t, r.app, secret2, "GET", "/api/v1/jobs", "").status)
}

// TestKeyLastUsedIsBatched: a request does not write the key's last use;
// the batch a moment later does, and a key in use is not written again
// within the minute.
func TestKeyLastUsedIsBatched(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	id := r.keyIDs[auth.ScopeEnqueue]
	lastUsed := func() *time.Time {
		var at *time.Time
		require.NoError(t, r.store.Pool().QueryRow(r.ctx, `SELECT last_used_at FROM api_keys WHERE id = $1`, id).Scan(&at))
		return at
	}
	require.Nil(t, lastUsed())
	res := apiCall(t, r.app, r.keys[auth.ScopeEnqueue], "POST", "/api/v1/jobs", `{"type":"noop"}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.Eventually(t, func() bool { return lastUsed() != nil }, 5*time.Second, 20*time.Millisecond)
	first := *lastUsed()
	for range 20 {
		apiCall(t, r.app, r.keys[auth.ScopeEnqueue], "POST", "/api/v1/jobs", `{"type":"noop"}`)
	}
	time.Sleep(300 * time.Millisecond) // several flush intervals (50 ms in tests)
	require.True(t, lastUsed().Equal(first), "written at most once a minute")
	p := dashCall(t, r.people[auth.RoleAdmin], "GET", "/keys", nil)
	require.Contains(t, p.body, "svc-enqueue")
	require.NotContains(t, p.body, r.keys[auth.ScopeEnqueue])
}

// TestDisablingAUserEndsTheirSession: the disabled person's open dashboard
// fails on its next request, they cannot sign in again, and a role change
// applies to the next request.
func TestDisablingAUserEndsTheirSession(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	op := r.people[auth.RoleOperator]
	require.Equal(t, http.StatusOK, dashCall(t, op, "GET", "/jobs", nil).status)
	opUser, err := r.store.UserByEmail(r.ctx, r.emails[auth.RoleOperator])
	require.NoError(t, err)

	// Demoted to viewer: the next action is refused.
	admin := r.people[auth.RoleAdmin]
	p := dashCall(t, admin, "POST", "/users/"+opUser.ID.String()+"/role", url.Values{"role": {"viewer"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, http.StatusForbidden, dashCall(t, op, "GET", "/jobs/new", nil).status)

	p = dashCall(t, admin, "POST", "/users/"+opUser.ID.String()+"/disable", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "disabled")
	p = op.request(t, "GET", "/jobs", nil)
	require.Equal(t, http.StatusSeeOther, p.status, "the open session ends at once")
	p = op.request(t, "GET", "/overview/live", nil, "HX-Request", "true")
	require.Equal(t, http.StatusUnauthorized, p.status)
	again := &dashBundle{app: r.app, cookies: map[string]string{}}
	p = again.login(t, r.emails[auth.RoleOperator], rolePassword, http.StatusForbidden)
	require.Contains(t, p.body, "disabled")

	// The last admin cannot be disabled, demoted or removed; nobody can
	// disable themself from the page.
	adminUser, err := r.store.UserByEmail(r.ctx, r.emails[auth.RoleAdmin])
	require.NoError(t, err)
	p = dashCall(t, admin, "POST", "/users/"+adminUser.ID.String()+"/role", url.Values{"role": {"viewer"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.header.Get("HX-Trigger"), "last enabled admin")
	p = dashCall(t, admin, "POST", "/users/"+adminUser.ID.String()+"/disable", nil)
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	_, err = r.store.DisableUser(r.ctx, adminUser.ID)
	require.ErrorContains(t, err, "last enabled admin")

	// Enabled again, they sign in with the role they were given.
	p = dashCall(t, admin, "POST", "/users/"+opUser.ID.String()+"/enable", nil)
	require.Equal(t, http.StatusOK, p.status)
	again.login(t, r.emails[auth.RoleOperator], rolePassword, http.StatusSeeOther)
	require.Equal(t, http.StatusForbidden, dashCall(t, again, "GET", "/jobs/new", nil).status)
}

// TestUsersPageAndPasswords: an admin adds people (a generated password is
// shown once and works), bad input is answered in the form, and a person
// changes their own password, which ends their other sessions.
func TestUsersPageAndPasswords(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	admin := r.people[auth.RoleAdmin]
	p := dashCall(t, admin, "POST", "/users", url.Values{"email": {"new@example.com"}, "role": {"operator"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	m := regexpSecret.FindStringSubmatch(p.body)
	require.NotNil(t, m, p.body)
	fresh := &dashBundle{app: r.app, cookies: map[string]string{}}
	fresh.login(t, "new@example.com", m[1], http.StatusSeeOther)

	p = dashCall(t, admin, "POST", "/users", url.Values{"email": {"new@example.com"}, "role": {"viewer"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "a user with this email exists")
	p = dashCall(t, admin, "POST", "/users", url.Values{"email": {"x@example.com"}, "role": {"root"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "must be viewer, operator or admin")
	p = dashCall(t, admin, "POST", "/users", url.Values{"email": {"y@example.com"}, "role": {"viewer"}, "password": {"short"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "at least 8")

	// Changing one's own password.
	viewer := r.people[auth.RoleViewer]
	other := r.signIn(t, r.emails[auth.RoleViewer])
	p = dashCall(t, viewer, "POST", "/account/password", url.Values{"current_password": {"wrong"}, "new_password": {"another long one"}, "confirm_password": {"another long one"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "is not your current password")
	p = dashCall(t, viewer, "POST", "/account/password", url.Values{"current_password": {rolePassword}, "new_password": {"another long one"}, "confirm_password": {"different"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	p = dashCall(t, viewer, "POST", "/account/password", url.Values{"current_password": {rolePassword}, "new_password": {"another long one"}, "confirm_password": {"another long one"}})
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Password changed")
	require.Equal(t, http.StatusOK, viewer.request(t, "GET", "/jobs", nil).status, "this session stays")
	require.Equal(t, http.StatusSeeOther, other.request(t, "GET", "/jobs", nil).status, "the other session ends")
	again := &dashBundle{app: r.app, cookies: map[string]string{}}
	again.login(t, r.emails[auth.RoleViewer], "another long one", http.StatusSeeOther)
}

// TestAuditNamesPersonOrKey: every audit entry says which person or which
// key acted.
func TestAuditNamesPersonOrKey(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	a, b, c := enqueueDead(t, r), enqueueDead(t, r), enqueueDead(t, r)
	require.Equal(t, http.StatusOK, apiCall(t, r.app, r.keys[auth.ScopeOperate], "POST", "/api/v1/jobs/"+a.String()+"/retry", "").status)
	require.Equal(t, http.StatusOK, apiCall(t, r.app, apiKey, "POST", "/api/v1/jobs/"+b.String()+"/retry", "").status)
	p := dashCall(t, r.people[auth.RoleOperator], "POST", "/jobs/"+c.String()+"/retry", nil)
	require.Equal(t, http.StatusOK, p.status, p.body)
	res := apiCall(t, r.app, r.keys[auth.ScopeAdmin], "POST", "/api/v1/keys", `{"name":"made-by-key","scopes":["read"]}`)
	require.Equal(t, http.StatusCreated, res.status)
	require.Equal(t, "key:svc-admin", res.json(t)["created_by"])
	res = apiCall(t, r.app, r.keys[auth.ScopeAdmin], "PATCH", "/api/v1/settings", `{"retention_completed_days": 3}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	entries, err := r.store.ListAudit(r.ctx, jobs.AuditQuery{Limit: 100})
	require.NoError(t, err)
	who := map[string]string{}
	for _, e := range entries {
		key := e.Action
		if e.JobID != nil {
			key += " " + e.JobID.String()
		}
		who[key] = e.Source + " " + e.Actor
	}
	require.Equal(t, "api key:svc-operate", who["retry "+a.String()])
	require.Equal(t, "api key:FLINT_API_KEY", who["retry "+b.String()])
	require.Equal(t, "dashboard operator@example.com", who["retry "+c.String()])
	require.Equal(t, "api key:svc-admin", who["key_create"])
	changes, err := r.store.ListSettingsChanges(r.ctx, 10)
	require.NoError(t, err)
	require.NotEmpty(t, changes)
	require.True(t, strings.HasPrefix(changes[0].ChangedBy, "key:svc-admin@"), changes[0].ChangedBy)
}

// TestOpenAPINamesEachScope: every guarded operation in openapi.json says
// the scope the access table gives it and documents the 403.
func TestOpenAPINamesEachScope(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(handlers.OpenAPI(), &doc))
	param := regexp.MustCompile(`\{(\w+)\}`)
	checked := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				Scope     string                     `json:"x-flint-scope"`
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if json.Unmarshal(raw, &op) != nil || op.Responses == nil {
				continue // parameters and the like
			}
			route := param.ReplaceAllString(path, ":$1")
			need, _, _, ok := handlers.AccessNeed(strings.ToUpper(method), route)
			if !ok {
				require.True(t, handlers.IsPublicRoute(strings.ToUpper(method), route), "%s %s is neither public nor in the access table", method, path)
				continue
			}
			require.Equal(t, string(need), op.Scope, "x-flint-scope of %s %s", method, path)
			require.Contains(t, op.Responses, "403", "%s %s documents its 403", method, path)
			checked++
		}
	}
	require.Greater(t, checked, 30)
}

// TestIdempotencyKeyRevealsOnlyThatItIsTaken: a key that may enqueue but
// not read learns of an existing job its idempotency key matches only its
// id, status, type, queue and creation time, from a single enqueue, a batch
// or a workflow; a key that may read gets the job in full, as before.
func TestIdempotencyKeyRevealsOnlyThatItIsTaken(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	_, readEnqueue, err := r.store.CreateAPIKey(r.ctx, "svc-enqueue-read", []auth.Scope{auth.ScopeEnqueue, auth.ScopeRead}, "test")
	require.NoError(t, err)
	// Another service's job, finished, with a payload, a result and an error.
	res := apiCall(t, r.app, readEnqueue, "POST", "/api/v1/jobs",
		`{"type":"noop","queue":"billing","payload":{"card":"4111-secret"},"idempotency_key":"invoice-42"}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	id := res.json(t)["id"].(string)
	_, err = r.store.Pool().Exec(r.ctx, `UPDATE jobs SET status = 'completed', finished_at = now(),
		result = '{"charged":"secret-result"}', last_error = 'secret-error' WHERE id = $1`, id)
	require.NoError(t, err)
	secrets := []string{"4111-secret", "secret-result", "secret-error", `"payload"`, `"result"`, `"last_error"`, `"idempotency_key"`}
	refOnly := func(job map[string]any, raw string) {
		t.Helper()
		require.Equal(t, id, job["id"])
		require.Equal(t, "completed", job["status"])
		require.Equal(t, "noop", job["type"])
		require.Equal(t, "billing", job["queue"])
		require.NotEmpty(t, job["created_at"])
		for _, s := range secrets {
			require.NotContains(t, raw, s)
		}
	}
	enqueueOnly := r.keys[auth.ScopeEnqueue]

	// One job.
	again := `{"type":"noop","payload":{"other":true},"idempotency_key":"invoice-42"}`
	res = apiCall(t, r.app, enqueueOnly, "POST", "/api/v1/jobs", again)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	job := res.json(t)
	refOnly(job, string(res.body))
	require.Len(t, job, 5, "id, status, type, queue, created_at: %s", res.body)
	for _, key := range []string{readEnqueue, apiKey} {
		res = apiCall(t, r.app, key, "POST", "/api/v1/jobs", again)
		require.Equal(t, http.StatusOK, res.status)
		require.Contains(t, string(res.body), "4111-secret", "a key that may read sees the job in full")
		require.Contains(t, string(res.body), "secret-error")
	}

	// A batch: the new job in full (the caller wrote it), the existing one
	// as a reference.
	batch := `{"jobs":[{"type":"noop","payload":{"mine":"visible"}},{"type":"noop","idempotency_key":"invoice-42"}]}`
	res = apiCall(t, r.app, enqueueOnly, "POST", "/api/v1/jobs/batch", batch)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var out struct{ Jobs []json.RawMessage }
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Len(t, out.Jobs, 2)
	require.Contains(t, string(out.Jobs[0]), `"mine":"visible"`)
	var ref map[string]any
	require.NoError(t, json.Unmarshal(out.Jobs[1], &ref))
	refOnly(ref, string(out.Jobs[1]))
	require.Len(t, ref, 5)
	res = apiCall(t, r.app, readEnqueue, "POST", "/api/v1/jobs/batch", `{"jobs":[{"type":"noop","idempotency_key":"invoice-42"}]}`)
	require.Equal(t, http.StatusCreated, res.status)
	require.Contains(t, string(res.body), "4111-secret")

	// A workflow.
	flow := `{"jobs":[{"key":"a","type":"noop","payload":{"mine":"visible"}},{"key":"b","type":"noop","idempotency_key":"invoice-42"}]}`
	res = apiCall(t, r.app, enqueueOnly, "POST", "/api/v1/workflows", flow)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Len(t, out.Jobs, 2)
	require.Contains(t, string(out.Jobs[0]), `"mine":"visible"`)
	ref = nil
	require.NoError(t, json.Unmarshal(out.Jobs[1], &ref))
	require.Equal(t, "b", ref["key"])
	delete(ref, "key")
	refOnly(ref, string(out.Jobs[1]))
	require.Len(t, ref, 5)
	res = apiCall(t, r.app, readEnqueue, "POST", "/api/v1/workflows", `{"jobs":[{"key":"c","type":"noop","idempotency_key":"invoice-42"}]}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.Contains(t, string(res.body), "4111-secret")
}

// TestRevokingARevokedKey: revoking a key twice is a 409 that says so, on
// the API and on the Keys page, and the audit trail has one revocation.
func TestRevokingARevokedKey(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	id := r.keyIDs[auth.ScopeRead].String()
	require.Equal(t, http.StatusOK, apiCall(t, r.app, apiKey, "DELETE", "/api/v1/keys/"+id, "").status)
	res := apiCall(t, r.app, apiKey, "DELETE", "/api/v1/keys/"+id, "")
	require.Equal(t, http.StatusConflict, res.status, string(res.body))
	e := res.json(t)["error"].(map[string]any)
	require.Equal(t, "already_revoked", e["code"])
	require.Contains(t, e["message"], "revoked already")
	p := dashCall(t, r.people[auth.RoleAdmin], "POST", "/keys/"+id+"/revoke", nil)
	require.Equal(t, http.StatusConflict, p.status, p.body)
	require.Contains(t, p.header.Get("HX-Trigger"), "revoked already")
	require.Equal(t, http.StatusNotFound, apiCall(t, r.app, apiKey, "DELETE", "/api/v1/keys/"+uuid.NewString(), "").status)

	entries, err := r.store.ListAudit(r.ctx, jobs.AuditQuery{Limit: 100})
	require.NoError(t, err)
	revocations := 0
	for _, en := range entries {
		if en.Action == "key_revoke" {
			revocations++
		}
	}
	require.Equal(t, 1, revocations, "one audit entry for the one revocation")
}
