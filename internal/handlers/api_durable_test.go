package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// key makes an API key with scopes, limited to queues when given.
func (r *workRig) key(t *testing.T, name string, scopes []auth.Scope, queues ...string) string {
	t.Helper()
	_, secret, err := r.store.CreateAPIKey(r.ctx, auth.KeySpec{Name: name, Scopes: scopes, Queues: queues}, "test")
	require.NoError(t, err)
	return secret
}

// waitIn leaves job j (queue q) waiting for a signal or event, as its
// worker would.
func (r *workRig) waitIn(t *testing.T, q string, w jobs.WaitingFor) *jobs.Job {
	t.Helper()
	got, err := r.store.ClaimJobs(r.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{q}, Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, _, err = r.store.FinishJobs(r.ctx, []domain.Finish{{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSuspended, Wait: &w}})
	require.NoError(t, err)
	return got[0]
}

// TestSignalAPI: a signal sent before the wait is kept (202), the same id
// again is a duplicate, one sent during the wait resumes the job; a
// finished job answers 409; a key without the scope 403; a key limited
// to other queues 403; bad names and bodies 4xx naming the field.
func TestSignalAPI(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	j := r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "refunds"})[0]
	path := "/api/v1/jobs/" + j.ID.String() + "/signals/approval"
	var out map[string]any
	require.Equal(t, http.StatusAccepted, r.call(t, apiKey, http.MethodPost, path, `{"id": "s-1", "body": {"by": "ann"}}`, &out))
	require.Equal(t, false, out["resumed"], "kept for the wait to come")
	require.Equal(t, false, out["duplicate"])
	require.Equal(t, http.StatusAccepted, r.call(t, apiKey, http.MethodPost, path, `{"id": "s-1", "body": {"by": "bob"}}`, &out))
	require.Equal(t, true, out["duplicate"], "the same id delivers once")

	w := r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "waits"})[0]
	r.waitIn(t, "waits", jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "approval", Until: time.Now().Add(48 * time.Hour)})
	var view map[string]any
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, "/api/v1/jobs/"+w.ID.String(), nil, &view))
	require.Equal(t, "waiting", view["status"])
	require.Equal(t, "signal", view["waiting_for"].(map[string]any)["kind"])
	require.Equal(t, "approval", view["waiting_for"].(map[string]any)["name"])
	wpath := "/api/v1/jobs/" + w.ID.String() + "/signals/approval"
	require.Equal(t, http.StatusAccepted, r.call(t, apiKey, http.MethodPost, wpath, `{"body": {"ok": true}}`, &out))
	require.Equal(t, true, out["resumed"])
	require.Equal(t, jobs.StateQueued, r.job(t, w.ID).Status)

	// Finished: 409.
	c, err := r.store.ClaimJobs(r.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"refunds"}, Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	_, _, err = r.store.FinishJobs(r.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSucceeded}})
	require.NoError(t, err)
	var e errBody
	require.Equal(t, http.StatusConflict, r.call(t, apiKey, http.MethodPost, path, `{"body": 1}`, &e))

	// Scopes and queue limits.
	other := r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "refunds"})[0]
	opath := "/api/v1/jobs/" + other.ID.String() + "/signals/approval"
	readKey := r.key(t, "reader", []auth.Scope{auth.ScopeRead})
	require.Equal(t, http.StatusForbidden, r.call(t, readKey, http.MethodPost, opath, `{}`, &e))
	limited := r.key(t, "billing", []auth.Scope{auth.ScopeEnqueue, auth.ScopeWork}, "billing")
	require.Equal(t, http.StatusForbidden, r.call(t, limited, http.MethodPost, opath, `{}`, &e))
	require.Contains(t, e.Error.Message, "refunds")
	mine := r.key(t, "refunder", []auth.Scope{auth.ScopeEnqueue, auth.ScopeWork}, "refunds")
	require.Equal(t, http.StatusAccepted, r.call(t, mine, http.MethodPost, opath, `{}`, &out))

	// Hostile input: nothing is kept.
	for _, tc := range []struct{ path, body, field string }{
		{"/api/v1/jobs/" + other.ID.String() + "/signals/bad%20name", `{}`, "name"},
		{"/api/v1/jobs/" + other.ID.String() + "/signals/" + strings.Repeat("n", 201), `{}`, "name"},
		{opath, `{"body": "` + strings.Repeat("x", domain.MaxSignalBodyBytes) + `"}`, "body"},
		{opath, `{"id": ""}`, "id"},
		{opath, `{"nope": 1}`, ""},
		{"/api/v1/jobs/not-a-uuid/signals/x", `{}`, "id"},
	} {
		status := r.call(t, apiKey, http.MethodPost, tc.path, tc.body, &e)
		require.True(t, status == http.StatusBadRequest || status == http.StatusUnprocessableEntity, "%s: %d %+v", tc.path, status, e)
		if tc.field != "" {
			require.Equal(t, tc.field, e.Error.Field, tc.path)
		}
	}
	require.Equal(t, http.StatusNotFound, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+uuid.NewString()+"/signals/x", `{}`, &e))
	c, err = r.store.ClaimJobs(r.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"refunds"}, Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, c[0].Signals, 1, "only the accepted signal was kept")
}

// TestEventAPI: an event resumes every job waiting for it (those of the
// key's queues for a limited key) and says how many.
func TestEventAPI(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	for _, q := range []string{"shop", "shop", "other"} {
		r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: q})
		r.waitIn(t, q, jobs.WaitingFor{Kind: jobs.WaitEvent, Name: "order.paid:1234", Until: time.Now().Add(time.Hour)})
	}
	var out map[string]any
	limited := r.key(t, "shop", []auth.Scope{auth.ScopeEnqueue, auth.ScopeWork}, "shop")
	require.Equal(t, http.StatusAccepted, r.call(t, limited, http.MethodPost, "/api/v1/events", `{"name": "order.paid:1234", "body": {"amount": 12}}`, &out))
	require.Equal(t, 2.0, out["delivered"])
	require.Equal(t, http.StatusAccepted, r.call(t, apiKey, http.MethodPost, "/api/v1/events", `{"name": "order.paid:1234"}`, &out))
	require.Equal(t, 1.0, out["delivered"])
	var e errBody
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/events", `{"body": 1}`, &e))
	require.Equal(t, "name", e.Error.Field)
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/events", `{"name": "a/b"}`, &e))
	require.Equal(t, "name", e.Error.Field)
}

// TestStepAPI: a pull worker records a step with its lease (201), the
// same name again returns the first record (200), a stale token is 409
// lease_lost and writes nothing, and bad fields are refused by name.
func TestStepAPI(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	wid := r.register(t, apiKey, `{"name": "py", "types": ["noop"], "queues": ["steps"]}`)
	j := r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "steps"})[0]
	var cl claimed
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+wid+"/claim", `{"max": 1}`, &cl))
	require.Len(t, cl.Jobs, 1)
	token := cl.Jobs[0].LeaseToken.String()
	path := "/api/v1/jobs/" + j.ID.String() + "/steps"
	var rec map[string]any
	require.Equal(t, http.StatusCreated, r.call(t, apiKey, http.MethodPost, path, `{"lease_token": "`+token+`", "name": "charge", "result": {"id": "ch_1"}}`, &rec))
	require.Equal(t, 1.0, rec["seq"])
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, path, `{"lease_token": "`+token+`", "name": "charge", "result": {"id": "ch_2"}}`, &rec))
	require.Equal(t, map[string]any{"id": "ch_1"}, rec["result"], "the recorded result, not the new one")
	started := time.Now().UTC().Truncate(time.Microsecond) // after the claim: within the run, kept as given
	require.Equal(t, http.StatusCreated, r.call(t, apiKey, http.MethodPost, path, `{"lease_token": "`+token+`", "name": "invoice", "started_at": "`+
		started.Format(time.RFC3339Nano)+`"}`, &rec))

	var e errBody
	for _, tc := range []struct{ body, field string }{
		{`{"lease_token": "` + token + `"}`, "name"},
		{`{"lease_token": "` + token + `", "name": "a\u0001b"}`, "name"},
		{`{"lease_token": "` + token + `", "name": "` + strings.Repeat("n", 201) + `"}`, "name"},
		{`{"lease_token": "` + token + `", "name": "big", "result": "` + strings.Repeat("x", jobs.MaxStepResultBytes) + `"}`, "result"},
		{`{"name": "x"}`, "lease_token"},
		{`{"lease_token": "` + token + `", "name": "x", "started_at": "yesterday"}`, "started_at"},
	} {
		status := r.call(t, apiKey, http.MethodPost, path, tc.body, &e)
		require.True(t, status == http.StatusBadRequest || status == http.StatusUnprocessableEntity, "%s: %d", tc.field, status)
		require.Equal(t, tc.field, e.Error.Field)
	}
	require.Equal(t, http.StatusConflict, r.call(t, apiKey, http.MethodPost, path, `{"lease_token": "`+uuid.NewString()+`", "name": "late"}`, &e))
	require.Equal(t, "lease_lost", e.Error.Code)
	steps, err := r.store.JobSteps(r.ctx, j.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2, "nothing half-applied")
	raw, _ := json.Marshal(steps[0].Result)
	require.JSONEq(t, `{"id":"ch_1"}`, string(steps[0].Result), "%s", raw)
	require.True(t, started.Equal(steps[1].StartedAt), "the step started when the worker said: %v, not %v", started, steps[1].StartedAt)
}

// TestReplayKeepsOrDropsSteps: a replay from the dead-letter queue keeps
// the job's recorded steps unless asked to start over.
func TestReplayKeepsOrDropsSteps(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	j := r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "dlq"})[0]
	kill := func() {
		t.Helper()
		c, err := r.store.ClaimJobs(r.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"dlq"}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, c, 1)
		_, _, err = r.store.RecordStep(r.ctx, domain.LeaseOf(c[0]), jobs.StepRecord{Name: "charge", Result: []byte(`1`)})
		require.NoError(t, err)
		_, _, err = r.store.FinishJobs(r.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeFailed, Error: "x", Final: true}})
		require.NoError(t, err)
		require.Equal(t, jobs.StateDeadLetter, r.job(t, j.ID).Status)
	}
	steps := func() int {
		t.Helper()
		st, err := r.store.JobSteps(r.ctx, j.ID)
		require.NoError(t, err)
		return len(st)
	}
	kill()
	var e errBody
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+j.ID.String()+"/retry?steps=sometimes", nil, &e))
	require.Equal(t, "steps", e.Error.Field)
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+j.ID.String()+"/retry", nil, nil))
	require.Equal(t, 1, steps(), "kept by default")
	kill()
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+j.ID.String()+"/retry?steps=start_over", nil, nil))
	require.Equal(t, 0, steps(), "dropped when starting over")
	require.Equal(t, jobs.StateQueued, r.job(t, j.ID).Status)
}
