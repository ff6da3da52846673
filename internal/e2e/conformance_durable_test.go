package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// conformDurable: a step recorded under the attempt's lease runs once
// across a retry (the charge before the failing email does not run
// again); a wait for a signal resumes with the signal's body, or with a
// timeout; a wait for an event resumes with the event; a durable sleep
// resumes after its time with the steps before it recorded; a changed step
// order fails the job for good.
func conformDurable(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	r.start(t, "durable", 4)

	order := r.enqueue(t, `{"type": "conformance.order", "payload": {"order": "o-1"}}`)
	job := r.waitStatus(t, order, "completed")
	require.Equal(t, map[string]any{"charge": "ch_o-1", "invoice": "INV-ch_o-1"}, job["result"])
	require.Len(t, r.marksOf(t, "charge", order), 1, "the charge ran once")
	require.Len(t, r.marksOf(t, "email", order), 2, "the email, not recorded, ran again")
	tokens := map[string]bool{} // the leases Flint handed out for the order
	for _, c := range r.wire.of("/claim") {
		jobs, _ := c.answer["jobs"].([]any)
		for _, j := range jobs {
			if j := j.(map[string]any); j["id"] == order {
				tokens[j["lease_token"].(string)] = true
			}
		}
	}
	var names []string
	for _, c := range r.wire.of("/steps") {
		if strings.Contains(c.path, order) {
			names = append(names, c.body["name"].(string))
			require.True(t, tokens[c.body["lease_token"].(string)], "a step is recorded under the attempt's lease")
		}
	}
	require.Equal(t, []string{"charge", "invoice", "email"}, names, "each step recorded once, in order")

	refund := r.enqueue(t, `{"type": "conformance.refund", "payload": {}}`)
	job = r.waitStatus(t, refund, "waiting")
	require.Equal(t, map[string]any{"kind": "signal", "name": "approval"}, pick(job["waiting_for"], "kind", "name"))
	var out map[string]any
	require.Equal(t, http.StatusAccepted, r.api.do(t, http.MethodPost, "/api/v1/jobs/"+refund+"/signals/approval",
		`{"id": "approval-1", "body": {"by": "ann"}}`, &out))
	job = r.waitStatus(t, refund, "completed")
	require.Equal(t, map[string]any{"refunded": true, "by": "ann"}, job["result"])
	late := r.enqueue(t, `{"type": "conformance.refund", "payload": {"timeout": 1}}`)
	require.Equal(t, map[string]any{"refunded": false}, r.waitStatus(t, late, "completed")["result"], "timed out")

	paid := r.enqueue(t, `{"type": "conformance.paid", "payload": {"order": "7"}}`)
	job = r.waitStatus(t, paid, "waiting")
	require.Equal(t, map[string]any{"kind": "event", "name": "order.paid:7"}, pick(job["waiting_for"], "kind", "name"))
	require.Equal(t, http.StatusAccepted, r.api.do(t, http.MethodPost, "/api/v1/events", `{"name": "order.paid:7", "body": {"amount": 1999}}`, &out))
	require.Equal(t, map[string]any{"paid": 1999.0}, r.waitStatus(t, paid, "completed")["result"])

	nap := r.enqueue(t, `{"type": "conformance.nap", "payload": {}}`)
	job = r.waitStatus(t, nap, "waiting")
	require.Equal(t, map[string]any{"kind": "sleep", "name": "cool-off"}, pick(job["waiting_for"], "kind", "name"))
	require.Equal(t, "woke", r.waitStatus(t, nap, "completed")["result"])
	require.Len(t, r.marksOf(t, "before", nap), 1, "the step before the sleep ran once")

	reorder := r.enqueue(t, `{"type": "conformance.reorder", "payload": {}}`)
	job = r.waitStatus(t, reorder, "dead_letter")
	require.Contains(t, job["last_error"], "step order changed")
}

// pick is the named fields of a JSON object (nil when v is not one).
func pick(v any, names ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]any{}
	for _, n := range names {
		out[n] = m[n]
	}
	return out
}
