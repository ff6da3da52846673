package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
)

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
}

// TestAccessDashboardRoutes is TestAccessKeyRoutes for people: what a
// handful of dashboard routes allow and refuse each role, and how a
// refusal reads.
func TestAccessDashboardRoutes(t *testing.T) {
	t.Parallel()
	r := accessSetup(t)
	dead := enqueueDead(t, r)

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
	lastUsedOf := func(id uuid.UUID) *time.Time {
		var at *time.Time
		require.NoError(t, r.store.Pool().QueryRow(r.ctx, `SELECT last_used_at FROM api_keys WHERE id = $1`, id).Scan(&at))
		return at
	}
	lastUsed := func() *time.Time { return lastUsedOf(r.keyIDs[auth.ScopeEnqueue]) }
	require.Nil(t, lastUsed())
	res := apiCall(t, r.app, r.keys[auth.ScopeEnqueue], "POST", "/api/v1/jobs", `{"type":"noop"}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	require.Eventually(t, func() bool { return lastUsed() != nil }, 5*time.Second, 20*time.Millisecond)
	first := *lastUsed()
	for range 20 {
		apiCall(t, r.app, r.keys[auth.ScopeEnqueue], "POST", "/api/v1/jobs", `{"type":"noop"}`)
	}
	// Another key's first use, noted after those calls, is written by a
	// later batch than any of them: once it is stored, theirs would be too.
	other := r.keyIDs[auth.ScopeRead]
	require.Nil(t, lastUsedOf(other))
	require.Equal(t, http.StatusOK, apiCall(t, r.app, r.keys[auth.ScopeRead], "GET", "/api/v1/jobs", "").status)
	require.Eventually(t, func() bool { return lastUsedOf(other) != nil }, 5*time.Second, 20*time.Millisecond)
	require.True(t, lastUsed().Equal(first), "written at most once a minute")
	p := dashCall(t, r.people[auth.RoleAdmin], "GET", "/keys", nil)
	require.Contains(t, p.body, "svc-enqueue")
	require.NotContains(t, p.body, r.keys[auth.ScopeEnqueue])
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
	_, readEnqueue, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "svc-enqueue-read", Scopes: []auth.Scope{auth.ScopeEnqueue, auth.ScopeRead}}, "test")
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

	entries, err := r.store.ListAudit(r.ctx, domain.AuditQuery{Limit: 100})
	require.NoError(t, err)
	revocations := 0
	for _, en := range entries {
		if en.Action == "key_revoke" {
			revocations++
		}
	}
	require.Equal(t, 1, revocations, "one audit entry for the one revocation")
}
