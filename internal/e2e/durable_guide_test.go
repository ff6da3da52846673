package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDurableGuideGoIsTheExample: the Go program the durable guide shows
// is the example program TestStepsSurviveSIGKILL builds and runs.
func TestDurableGuideGoIsTheExample(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(filepath.Join("..", "..", "examples", "durable", "main.go"))
	require.NoError(t, err)
	require.Equal(t, string(want), docBlock(t, "docs/durable.md", "examples/durable/main.go"),
		"docs/durable.md's Go program and examples/durable/main.go have drifted apart")
}

// TestDurableGuidePython runs the durable guide's Python module as
// written with the reference worker against a real Flint: an order's
// steps, a refund approved by a signal (sent as the guide's curl sends
// it), and a reminder after a durable sleep.
func TestDurableGuidePython(t *testing.T) {
	t.Parallel()
	r := pythonRig(t)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "testjobs.py"), []byte(docBlock(t, "docs/durable.md", "refunds.py")), 0o644))
	r.pythonWorker(t, "--concurrency", "4")
	var order map[string]any
	waitFor(t, 15*time.Second, "the API to accept the types its worker serves", func() bool {
		return r.api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "py.order", "payload": {"order_id": "1042"}}`, &order) == http.StatusCreated
	})
	job := r.waitStatus(t, order["id"].(string), "completed")
	require.Equal(t, map[string]any{"charge": "ch_1042", "invoice": "INV-ch_1042"}, job["result"])

	refund := r.enqueue(t, `{"type": "py.refund", "payload": {"order_id": "1042", "amount_cents": 1999}}`)
	job = r.waitStatus(t, refund, "waiting")
	require.Equal(t, map[string]any{"kind": "signal", "name": "approval", "until": job["waiting_for"].(map[string]any)["until"]}, job["waiting_for"])
	var out map[string]any
	require.Equal(t, http.StatusAccepted, r.api.do(t, http.MethodPost, "/api/v1/jobs/"+refund+"/signals/approval",
		`{"id": "approval-1042", "body": {"approved": true, "by": "ann"}}`, &out))
	require.Equal(t, true, out["resumed"])
	job = r.waitStatus(t, refund, "completed")
	require.Equal(t, map[string]any{"refunded": true, "refund": "re_1042", "approved_by": "ann"}, job["result"])

	reminder := r.enqueue(t, `{"type": "py.reminder", "payload": {"order_id": "1042", "after_seconds": 1}}`)
	r.waitStatus(t, reminder, "waiting")
	job = r.waitStatus(t, reminder, "completed")
	require.Equal(t, "reminded about 1042", job["result"])
}
