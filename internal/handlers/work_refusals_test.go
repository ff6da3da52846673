package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/jobs"
)

// TestPullWorkerBadInput: every new field is checked with a 4xx naming
// it, and a refused finish applies nothing.
func TestPullWorkerBadInput(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	id := r.register(t, apiKey, `{"types": ["py.x"]}`)
	other := r.register(t, apiKey, `{"types": ["py.x"]}`)
	js := r.enqueue(t, jobs.EnqueueParams{Type: "py.x"}, jobs.EnqueueParams{Type: "py.x"})
	var got claimed
	r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+other+"/claim", `{"max": 1}`, &got)
	require.Len(t, got.Jobs, 1)
	theirs := got.Jobs[0]
	r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"max": 1}`, &got)
	require.Len(t, got.Jobs, 1)
	mine := got.Jobs[0]

	cases := []struct {
		path, body string
		status     int
		field      string
	}{
		{"/api/v1/workers", `{}`, 422, "types"},
		{"/api/v1/workers", `{"types": []}`, 422, "types"},
		{"/api/v1/workers", `{"types": ["ok", "bad type"]}`, 422, "types[1]"},
		{"/api/v1/workers", `{"types": ["a", "a"]}`, 422, "types[1]"},
		{"/api/v1/workers", `{"types": ["a"], "queues": ["q q"]}`, 422, "queues[0]"},
		{"/api/v1/workers", `{"types": ["a"], "concurrency": 0}`, 422, "concurrency"},
		{"/api/v1/workers", `{"types": ["a"], "concurrency": 10001}`, 422, "concurrency"},
		{"/api/v1/workers", `{"types": ["a"], "name": "` + strings.Repeat("n", 101) + `"}`, 422, "name"},
		{"/api/v1/workers", `{"types": ["a"], "language": "py\u0007"}`, 422, "language"},
		{"/api/v1/workers", `{"types": ["a"], "colour": "red"}`, 422, "colour"},
		{"/api/v1/workers/" + id + "/claim", `{"max": 0}`, 422, "max"},
		{"/api/v1/workers/" + id + "/claim", `{"max": 101}`, 422, "max"},
		{"/api/v1/workers/" + id + "/claim", `{"wait_seconds": 31}`, 422, "wait_seconds"},
		{"/api/v1/workers/" + id + "/claim", `{"wait_seconds": -1}`, 422, "wait_seconds"},
		{"/api/v1/workers/nope/claim", `{}`, 404, ""},
		{"/api/v1/workers/" + id + "/heartbeat", `{"leases": [{"lease_token": "` + mine.LeaseToken.String() + `"}]}`, 422, "leases[0].job_id"},
		{"/api/v1/workers/" + id + "/heartbeat", `{"leases": [{"job_id": "` + mine.ID.String() + `", "lease_token": "` + mine.LeaseToken.String() + `", "progress": 101}]}`, 422, "leases[0].progress"},
		{"/api/v1/workers/" + id + "/heartbeat", `{"leases": [{"job_id": "nope", "lease_token": "x"}]}`, 422, "leases[0].job_id"},
		{"/api/v1/workers/" + id + "/finish", `{"outcomes": []}`, 422, "outcomes"},
		{"/api/v1/workers/" + id + "/finish", `{"outcomes": [{"job_id": "` + mine.ID.String() + `", "lease_token": "` + mine.LeaseToken.String() + `", "status": "done"}]}`, 422, "outcomes[0].status"},
		{"/api/v1/workers/" + id + "/finish", `{"outcomes": [{"job_id": "` + mine.ID.String() + `", "lease_token": "` + mine.LeaseToken.String() + `", "status": "completed", "retryable": false}]}`, 422, "outcomes[0].retryable"},
		{"/api/v1/workers/" + id + "/finish", `{"outcomes": [{"job_id": "` + mine.ID.String() + `", "lease_token": "` + mine.LeaseToken.String() + `", "status": "failed", "retry_after_seconds": -5}]}`, 422, "outcomes[0].retry_after_seconds"},
		{"/api/v1/workers/" + id + "/finish", `{"outcomes": [{"job_id": "` + mine.ID.String() + `", "lease_token": "` + mine.LeaseToken.String() + `", "status": "failed", "result": {"a": 1}}]}`, 422, "outcomes[0].result"},
		// A valid outcome beside a job this worker never claimed: nothing applied.
		{"/api/v1/workers/" + id + "/finish", `{"outcomes": [{"job_id": "` + mine.ID.String() + `", "lease_token": "` + mine.LeaseToken.String() + `", "status": "completed"},
			{"job_id": "` + theirs.ID.String() + `", "lease_token": "` + theirs.LeaseToken.String() + `", "status": "completed"}]}`, 422, "outcomes[1].job_id"},
		{"/api/v1/jobs/" + mine.ID.String() + "/logs", `{"lease_token": "` + mine.LeaseToken.String() + `", "lines": [{"level": "loud", "message": "x"}]}`, 422, "lines[0].level"},
		{"/api/v1/jobs/" + mine.ID.String() + "/logs", `{"lease_token": "` + mine.LeaseToken.String() + `", "lines": [{"level": "info"}]}`, 422, "lines[0].message"},
		{"/api/v1/jobs/" + mine.ID.String() + "/logs", `{"lines": [{"message": "x"}]}`, 422, "lease_token"},
	}
	for _, c := range cases {
		var e errBody
		require.Equal(t, c.status, r.call(t, apiKey, http.MethodPost, c.path, c.body, &e), "%s %s: %+v", c.path, c.body, e)
		require.Equal(t, c.field, e.Error.Field, "%s %s", c.path, c.body)
		require.NotEmpty(t, e.Error.Message)
	}
	require.Equal(t, jobs.StateRunning, r.job(t, mine.ID).Status, "nothing half-applied")
	require.Equal(t, jobs.StateRunning, r.job(t, theirs.ID).Status)
	require.Equal(t, js[0].Queue, "default")
}

// TestPullWorkerKeys: the work scope opens the pull API and nothing else;
// a key limited to queues registers only for them (its queues by default)
// and is offered nothing else; another key may not act for a worker.
func TestPullWorkerKeys(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	_, limited, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "thumbs", Scopes: []auth.Scope{auth.ScopeWork}, Queues: []string{"thumbs"}}, "test")
	require.NoError(t, err)
	_, open, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "all-work", Scopes: []auth.Scope{auth.ScopeWork}}, "test")
	require.NoError(t, err)
	_, _, err = r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "bad", Scopes: []auth.Scope{auth.ScopeRead}, Queues: []string{"x"}}, "test")
	require.ErrorContains(t, err, "work scope")

	var e errBody
	require.Equal(t, http.StatusForbidden, r.call(t, limited, http.MethodPost, "/api/v1/workers", `{"types": ["py.x"], "queues": ["thumbs", "reports"]}`, &e))
	require.Equal(t, "queues[1]", e.Error.Field)
	require.Equal(t, http.StatusForbidden, r.call(t, limited, http.MethodGet, "/api/v1/jobs", nil, &e), "work is not read")
	id := r.register(t, limited, `{"types": ["py.x"]}`)
	r.enqueue(t, jobs.EnqueueParams{Type: "py.x", Queue: "reports"}, jobs.EnqueueParams{Type: "py.x", Queue: "thumbs"})
	var got claimed
	require.Equal(t, http.StatusOK, r.call(t, limited, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"max": 10}`, &got))
	require.Len(t, got.Jobs, 1)
	require.Equal(t, "thumbs", got.Jobs[0].Queue)

	require.Equal(t, http.StatusForbidden, r.call(t, open, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{}`, &e))
	require.Contains(t, e.Error.Message, "another key")
	require.Equal(t, http.StatusForbidden, r.call(t, open, http.MethodPost, "/api/v1/workers/"+id+"/quiet", nil, &e), "work cannot quiet workers")

	// An operator quiets it: claims give nothing, the heartbeat says so.
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/quiet", nil, nil))
	var beat struct {
		State string `json:"state"`
	}
	require.Equal(t, http.StatusOK, r.call(t, limited, http.MethodPost, "/api/v1/workers/"+id+"/heartbeat", `{"leases": []}`, &beat))
	require.Equal(t, "quiet", beat.State)
	r.enqueue(t, jobs.EnqueueParams{Type: "py.x", Queue: "thumbs"})
	require.Equal(t, http.StatusOK, r.call(t, limited, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"max": 10}`, &got))
	require.Empty(t, got.Jobs, "a quiet worker is offered nothing")
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/terminate", nil, nil))
	require.Equal(t, http.StatusOK, r.call(t, limited, http.MethodPost, "/api/v1/workers/"+id+"/heartbeat", `{}`, &beat))
	require.Equal(t, "terminate", beat.State)
}
