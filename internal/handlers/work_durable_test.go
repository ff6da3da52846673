package handlers_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// durableClaim is a claim's answer with the durable fields.
type durableClaim struct {
	Jobs []struct {
		ID         string                     `json:"id"`
		LeaseToken string                     `json:"lease_token"`
		Steps      json.RawMessage            `json:"steps"`
		Signals    map[string]json.RawMessage `json:"signals"`
	} `json:"jobs"`
}

func (r *workRig) claimOne(t *testing.T, wid string) (id, token string, steps json.RawMessage, signals map[string]json.RawMessage) {
	t.Helper()
	var cl durableClaim
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+wid+"/claim", `{"max": 1}`, &cl))
	require.Len(t, cl.Jobs, 1)
	j := cl.Jobs[0]
	return j.ID, j.LeaseToken, j.Steps, j.Signals
}

func (r *workRig) finishOne(t *testing.T, wid string, outcome map[string]any) map[string]any {
	t.Helper()
	var out struct {
		Outcomes []map[string]any `json:"outcomes"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+wid+"/finish",
		map[string]any{"outcomes": []any{outcome}}, &out))
	return out.Outcomes[0]
}

// TestPullWorkerSleepsAndWaits: a pull worker records steps, sleeps (a
// wake time already past queues it again at once), and waits for a
// signal; each claim carries the recorded steps in their order and what
// resumed the wait.
func TestPullWorkerSleepsAndWaits(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	wid := r.register(t, apiKey, `{"name": "py", "types": ["noop"], "queues": ["d"]}`)
	r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "d"})
	id, token, steps, _ := r.claimOne(t, wid)
	require.Empty(t, steps)
	for _, name := range []string{"b-second", "a-first"} {
		require.Equal(t, http.StatusCreated, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+id+"/steps",
			map[string]any{"lease_token": token, "name": name, "result": name}, nil))
	}
	res := r.finishOne(t, wid, map[string]any{"job_id": id, "lease_token": token, "status": "sleeping",
		"wake_at": time.Now().Add(-time.Second).Format(time.RFC3339Nano)})
	require.Equal(t, true, res["ok"])
	require.Equal(t, "queued", res["status"], "a wake time past wakes at once")

	id2, token, steps, _ := r.claimOne(t, wid)
	require.Equal(t, id, id2)
	require.Equal(t, `{"b-second":"b-second","a-first":"a-first"}`, string(steps), "in the order recorded")
	res = r.finishOne(t, wid, map[string]any{"job_id": id, "lease_token": token, "status": "waiting", "signal": "approval", "timeout_seconds": 3600})
	require.Equal(t, "waiting", res["status"])
	var view map[string]any
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, "/api/v1/jobs/"+id, nil, &view))
	require.Equal(t, "signal", view["waiting_for"].(map[string]any)["kind"])
	require.Equal(t, 0.0, view["attempt"], "waiting charges no attempt")
	require.Equal(t, http.StatusAccepted, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+id+"/signals/approval", `{"body": {"ok": true}}`, nil))
	_, token, _, signals := r.claimOne(t, wid)
	require.JSONEq(t, `{"ok": true}`, string(must(t, signals["approval"], "body")))
	res = r.finishOne(t, wid, map[string]any{"job_id": id, "lease_token": token, "status": "completed"})
	require.Equal(t, "completed", res["status"])
}

func must(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	return m[key]
}

// TestPullWorkerSuspendRefusals: what a sleeping or waiting outcome gets
// wrong is refused naming the field, and the job is left as it was.
func TestPullWorkerSuspendRefusals(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	wid := r.register(t, apiKey, `{"name": "py", "types": ["noop"], "queues": ["d"]}`)
	j := r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "d"})[0]
	id, token, _, _ := r.claimOne(t, wid)
	base := func(kv ...any) map[string]any {
		o := map[string]any{"job_id": id, "lease_token": token}
		for i := 0; i+1 < len(kv); i += 2 {
			o[kv[i].(string)] = kv[i+1]
		}
		return o
	}
	far := time.Now().Add(400 * 24 * time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		outcome map[string]any
		field   string
	}{
		{base("status", "sleeping"), "outcomes[0].wake_at"},
		{base("status", "sleeping", "wake_at", "tomorrow"), "outcomes[0].wake_at"},
		{base("status", "sleeping", "wake_at", far), "outcomes[0].wake_at"},
		{base("status", "sleeping", "wake_at", far, "signal", "x"), "outcomes[0].signal"},
		{base("status", "waiting"), "outcomes[0].signal"},
		{base("status", "waiting", "signal", "a b"), "outcomes[0].signal"},
		{base("status", "waiting", "signal", "a", "event", "b"), "outcomes[0].event"},
		{base("status", "waiting", "event", "e", "timeout_seconds", -1), "outcomes[0].timeout_seconds"},
		{base("status", "waiting", "event", "e", "timeout_seconds", 400*86400), "outcomes[0].timeout_seconds"},
		{base("status", "waiting", "signal", "a", "retryable", false), "outcomes[0].retryable"},
		{base("status", "completed", "signal", "a"), "outcomes[0].signal"},
		{base("status", "snoozing"), "outcomes[0].status"},
	} {
		var e errBody
		require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+wid+"/finish",
			map[string]any{"outcomes": []any{tc.outcome}}, &e), "%v", tc.outcome)
		require.Equal(t, tc.field, e.Error.Field, "%v", tc.outcome)
	}
	require.Equal(t, jobs.StateRunning, r.job(t, j.ID).Status, "nothing applied")
}
