package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPythonWorkerDurable: the Python worker's steps run once across a
// retry, its wait for a signal resumes with the signal (or times out),
// and its durable sleep resumes after the steps before it.
func TestPythonWorkerDurable(t *testing.T) {
	t.Parallel()
	r := pythonRig(t)
	r.pythonWorker(t, "--concurrency", "4")
	var id string
	waitFor(t, 15*time.Second, "the API to accept the types its worker serves", func() bool {
		var job map[string]any
		ok := r.api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "py.order", "payload": {"order": "o-1"}}`, &job) == http.StatusCreated
		if ok {
			id = job["id"].(string)
		}
		return ok
	})
	job := r.waitStatus(t, id, "completed")
	require.Equal(t, map[string]any{"charge": "ch_o-1", "invoice": "INV-ch_o-1"}, job["result"])
	require.Len(t, r.marks(t, "charge"), 1, "the charge ran once")
	require.Len(t, r.marks(t, "email"), 2, "the email ran again")

	refund := r.enqueue(t, `{"type": "py.refund", "payload": {}}`)
	job = r.waitStatus(t, refund, "waiting")
	require.Equal(t, "signal", job["waiting_for"].(map[string]any)["kind"])
	var out map[string]any
	require.Equal(t, http.StatusAccepted, r.api.do(t, http.MethodPost, "/api/v1/jobs/"+refund+"/signals/approval",
		`{"id": "approval-1", "body": {"by": "ann"}}`, &out))
	require.Equal(t, true, out["resumed"])
	job = r.waitStatus(t, refund, "completed")
	require.Equal(t, map[string]any{"refunded": true, "by": "ann"}, job["result"])

	late := r.enqueue(t, `{"type": "py.refund", "payload": {"timeout": 1}}`)
	job = r.waitStatus(t, late, "completed")
	require.Equal(t, map[string]any{"refunded": false}, job["result"], "timed out")

	nap := r.enqueue(t, `{"type": "py.nap", "payload": {}}`)
	job = r.waitStatus(t, nap, "waiting")
	require.Equal(t, "sleep", job["waiting_for"].(map[string]any)["kind"])
	require.Equal(t, "cool-off", job["waiting_for"].(map[string]any)["name"])
	job = r.waitStatus(t, nap, "completed")
	require.Equal(t, "woke", job["result"])
	require.Len(t, r.marks(t, "before"), 1, "the step before the sleep ran once")
}
