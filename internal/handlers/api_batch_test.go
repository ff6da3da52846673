package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBatchAPI: a batch created open takes members until it is closed,
// reports its counts and callbacks, and refuses members once closed.
func TestBatchAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post(t, "/api/v1/batches", `{"open": true, "jobs": [{"type": "noop", "queue": "b"}, {"type": "noop", "queue": "b"}],
		"on_success": {"type": "noop", "queue": "cb", "payload": {"report": true}}, "on_death": {"type": "noop", "queue": "cb"}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	created := r.json(t)
	id := created["id"].(string)
	require.Equal(t, "open", created["state"])
	require.Len(t, created["jobs"], 2)
	for _, j := range created["jobs"].([]any) {
		require.Equal(t, id, j.(map[string]any)["batch_id"], "each member names its batch")
	}
	cbs := created["callbacks"].(map[string]any)
	require.Equal(t, "pending", cbs["on_success"].(map[string]any)["status"])
	require.NotContains(t, cbs, "on_complete")

	r = b.post(t, "/api/v1/batches/"+id+"/jobs", `{"jobs": [{"type": "noop", "queue": "b"}]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, 3.0, r.json(t)["total"])

	r = b.post(t, "/api/v1/batches/"+id+"/close", `{}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	got := r.json(t)
	require.Equal(t, "running", got["state"])
	require.Equal(t, map[string]any{"queued": 3.0}, got["counts"])

	r = b.post(t, "/api/v1/batches/"+id+"/jobs", `{"jobs": [{"type": "noop", "queue": "late"}]}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "batch_closed", r.json(t)["error"].(map[string]any)["code"])

	r = b.do(t, http.MethodGet, "/api/v1/batches/"+id, "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, 3.0, r.json(t)["total"])
	r = b.do(t, http.MethodGet, "/api/v1/batches?limit=1", "", "")
	require.Equal(t, http.StatusOK, r.status)
	list := r.json(t)["batches"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, id, list[0].(map[string]any)["id"])

	r = b.do(t, http.MethodGet, "/api/v1/batches/0190a0a0-0000-7000-8000-000000000000", "", "")
	require.Equal(t, http.StatusNotFound, r.status)
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "no such batch")
}

// TestBatchRefusals: what a batch request gets wrong is refused whole,
// naming the field, and creates nothing.
func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	many := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"type":"noop"},`, 10001), ",") + `]}`
	cases := []struct {
		name, path, body, field, msg string
	}{
		{"no members", "/api/v1/batches", `{"jobs": []}`, "jobs", "at least one"},
		{"no members at all", "/api/v1/batches", `{"on_success": {"type": "noop"}}`, "jobs", "at least one"},
		{"unknown member type", "/api/v1/batches", `{"jobs": [{"type": "nope"}]}`, "jobs[0].type", "unknown job type"},
		{"unknown callback type", "/api/v1/batches", `{"jobs": [{"type": "noop"}], "on_complete": {"type": "nope"}}`, "on_complete.type", "unknown job type"},
		{"callback depends on a member", "/api/v1/batches", `{"jobs": [{"type": "noop"}], "on_success": {"type": "noop", "depends_on": ["0190a0a0-0000-7000-8000-000000000000"]}}`, "on_success.depends_on", "cannot depend"},
		{"callback with a key", "/api/v1/batches", `{"jobs": [{"type": "noop"}], "on_success": {"type": "noop", "idempotency_key": "x"}}`, "on_success.idempotency_key", "once"},
		{"delayed callback", "/api/v1/batches", `{"jobs": [{"type": "noop"}], "on_death": {"type": "noop", "delay_seconds": 5}}`, "on_death.run_at", "settles"},
		{"member with a key", "/api/v1/batches", `{"jobs": [{"type": "noop", "idempotency_key": "k"}]}`, "jobs[0].idempotency_key", "member"},
		{"recurring member", "/api/v1/batches", `{"jobs": [{"type": "noop", "interval_seconds": 60}]}`, "jobs[0].interval_seconds", "recurring"},
		{"workflow key", "/api/v1/batches", `{"jobs": [{"type": "noop", "key": "a"}]}`, "jobs[0].key", "workflow"},
		{"unknown field", "/api/v1/batches", `{"jobs": [{"type": "noop"}], "on_sucess": {"type": "noop"}}`, "on_sucess", ""},
		{"too many", "/api/v1/batches", many, "jobs", "limit"},
		{"bad priority", "/api/v1/batches", `{"jobs": [{"type": "noop", "priority": "urgent"}]}`, "jobs[0].priority", "unknown priority"},
	}
	for _, tc := range cases {
		r := b.post(t, tc.path, tc.body)
		require.Contains(t, []int{http.StatusUnprocessableEntity, http.StatusBadRequest}, r.status, "%s: %s", tc.name, r.body)
		e := r.json(t)["error"].(map[string]any)
		require.Equal(t, tc.field, e["field"], "%s: %v", tc.name, e)
		require.Contains(t, e["message"], tc.msg, tc.name)
	}
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM batches)`).Scan(&n))
	require.Zero(t, n, "nothing half-applied")

	// An open batch without members cannot be closed.
	r := b.post(t, "/api/v1/batches", `{"open": true}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.post(t, "/api/v1/batches/"+r.json(t)["id"].(string)+"/close", `{}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "no members")
}
