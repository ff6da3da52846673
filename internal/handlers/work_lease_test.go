package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestLeaseWritesCheckTheHolder: a worker whose key may work only queue
// qa, holding the lease token of a queue-b job another key's worker
// holds, can neither heartbeat it (its progress stays), log to it, nor
// finish it, through any route.
func TestLeaseWritesCheckTheHolder(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	_, qa, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "qa", Scopes: []auth.Scope{auth.ScopeWork}, Queues: []string{"qa"}}, "test")
	require.NoError(t, err)
	_, qb, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "qb", Scopes: []auth.Scope{auth.ScopeWork}, Queues: []string{"b"}}, "test")
	require.NoError(t, err)
	intruder := r.register(t, qa, `{"types": ["py.x"]}`)
	owner := r.register(t, qb, `{"types": ["py.x"]}`)
	r.enqueue(t, jobs.EnqueueParams{Type: "py.x", Queue: "b"})
	var got claimed
	require.Equal(t, http.StatusOK, r.call(t, qb, http.MethodPost, "/api/v1/workers/"+owner+"/claim", `{"max": 1}`, &got))
	require.Len(t, got.Jobs, 1)
	job, token := got.Jobs[0].ID, got.Jobs[0].LeaseToken
	before := r.job(t, job).LeaseExpiresAt

	var beat struct {
		Lost []uuid.UUID `json:"lost"`
	}
	require.Equal(t, http.StatusOK, r.call(t, qa, http.MethodPost, "/api/v1/workers/"+intruder+"/heartbeat", map[string]any{"leases": []map[string]any{
		{"job_id": job, "lease_token": token, "progress": 99, "progress_message": "hijacked"}}}, &beat))
	require.Equal(t, []uuid.UUID{job}, beat.Lost, "a lease another worker holds is not this worker's")
	j := r.job(t, job)
	require.Nil(t, j.Progress)
	require.Nil(t, j.ProgressMessage)
	require.Equal(t, before, j.LeaseExpiresAt, "not extended")

	var e errBody
	for _, tc := range []struct{ path, body string }{
		{"/api/v1/jobs/" + job.String() + "/logs", `{"lease_token": "` + token.String() + `", "lines": [{"message": "hijacked"}]}`},
		{"/api/v1/jobs/" + job.String() + "/heartbeat", `{"lease_token": "` + token.String() + `", "progress_message": "hijacked"}`},
		{"/api/v1/jobs/" + job.String() + "/finish", `{"lease_token": "` + token.String() + `", "status": "completed"}`},
	} {
		require.Equal(t, http.StatusForbidden, r.call(t, qa, http.MethodPost, tc.path, tc.body, &e), tc.path)
		require.Equal(t, "forbidden", e.Error.Code)
	}
	lines, err := r.store.JobLogs(r.ctx, job, 0, 10)
	require.NoError(t, err)
	for _, l := range lines {
		require.NotContains(t, l.Message, "hijacked")
	}
	j = r.job(t, job)
	require.Equal(t, jobs.StateRunning, j.Status)
	require.Nil(t, j.ProgressMessage)

	// Its own worker's key may.
	require.Equal(t, http.StatusOK, r.call(t, qb, http.MethodPost, "/api/v1/jobs/"+job.String()+"/logs",
		`{"lease_token": "`+token.String()+`", "lines": [{"message": "mine"}]}`, nil))
}

// TestPushReceiverFinishesThroughTheAPI: the endpoint of a push queue
// that answered 202 heartbeats, logs and finishes the job with the
// lease_token the push carried, with a work key of the queue; a key of
// another queue may not; progress messages are scrubbed of secrets.
func TestPushReceiverFinishesThroughTheAPI(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	_, err := r.store.UpdateQueue(r.ctx, "hooks", "test", func(q domain.QueueSettings) domain.QueueSettings {
		return domain.QueuePatch{SetPush: true, Push: &domain.PushConfig{URL: "https://receiver.example/", TimeoutSeconds: 5}}.Apply(q)
	})
	require.NoError(t, err)
	_, hooks, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "hooks", Scopes: []auth.Scope{auth.ScopeWork}, Queues: []string{"hooks"}}, "test")
	require.NoError(t, err)
	_, other, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: "other", Scopes: []auth.Scope{auth.ScopeWork}, Queues: []string{"other"}}, "test")
	require.NoError(t, err)
	r.enqueue(t, jobs.EnqueueParams{Type: "thumb", Queue: "hooks", Payload: json.RawMessage(`{"n": 1}`)})
	// What the pusher does: claim as the process's pusher.
	claimedJobs, err := r.store.ClaimJobs(r.ctx, domain.ClaimParams{WorkerID: domain.PushWorkerID("proc-1"), Queues: []string{"hooks"},
		Push: true, Limit: 1, LeaseTTL: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, claimedJobs, 1)
	job, token := claimedJobs[0].ID, *claimedJobs[0].LeaseToken
	base := "/api/v1/jobs/" + job.String()

	var e errBody
	require.Equal(t, http.StatusForbidden, r.call(t, other, http.MethodPost, base+"/heartbeat", `{"lease_token": "`+token.String()+`"}`, &e))
	require.Equal(t, http.StatusForbidden, r.call(t, other, http.MethodPost, base+"/finish", `{"lease_token": "`+token.String()+`", "status": "completed"}`, &e))
	require.Equal(t, http.StatusConflict, r.call(t, hooks, http.MethodPost, base+"/heartbeat", `{"lease_token": "`+uuid.NewString()+`"}`, &e))
	require.Equal(t, "lease_lost", e.Error.Code)
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, hooks, http.MethodPost, base+"/finish", `{"lease_token": "`+token.String()+`", "status": "done"}`, &e))
	require.Equal(t, "status", e.Error.Field)

	var beat struct {
		CancelRequested bool    `json:"cancel_requested"`
		LeaseSeconds    float64 `json:"lease_seconds"`
	}
	require.Equal(t, http.StatusOK, r.call(t, hooks, http.MethodPost, base+"/heartbeat", map[string]any{"lease_token": token, "progress": 50,
		"progress_message": "halfway; password=hunter2 via postgres://u:pw@db/x"}, &beat))
	require.False(t, beat.CancelRequested)
	require.Equal(t, 30.0, beat.LeaseSeconds)
	var shown struct {
		Progress        int    `json:"progress"`
		ProgressMessage string `json:"progress_message"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, base, nil, &shown))
	require.Equal(t, 50, shown.Progress)
	require.NotContains(t, shown.ProgressMessage, "hunter2")
	require.NotContains(t, shown.ProgressMessage, ":pw@")
	require.Contains(t, shown.ProgressMessage, "halfway")

	require.Equal(t, http.StatusOK, r.call(t, hooks, http.MethodPost, base+"/logs", `{"lease_token": "`+token.String()+`", "lines": [{"message": "resized"}]}`, nil))
	var out struct {
		OK bool `json:"ok"`
	}
	require.Equal(t, http.StatusOK, r.call(t, hooks, http.MethodPost, base+"/finish", `{"lease_token": "`+token.String()+`", "status": "completed", "result": {"url": "x.png"}}`, &out))
	require.True(t, out.OK)
	j := r.job(t, job)
	require.Equal(t, jobs.StateCompleted, j.Status)
	require.JSONEq(t, `{"url": "x.png"}`, string(j.Result))
	require.Equal(t, http.StatusConflict, r.call(t, hooks, http.MethodPost, base+"/finish", `{"lease_token": "`+token.String()+`", "status": "completed"}`, &e), "once")
}
