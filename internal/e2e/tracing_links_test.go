package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// durableTraceJobs is a Python handler with two durable steps that fails
// its first attempt after the first step: the retry replays that step
// and runs the second.
const durableTraceJobs = `
from flint_worker import handler, Retry

@handler("py.durable")
def durable(job):
    job.step("charge", lambda: {"id": "ch_1"})
    if job.attempt == 1:
        raise Retry("card declined", after=0.1)
    job.step("invoice", lambda: "INV-1")
    return {"traceparent": job.traceparent}
`

// TestTracingLinksBatchesWorkflowsAndSteps checks, against a real Jaeger,
// that what a job leads to stays in the trace of the request that
// started it: a batch's members and its callback; a workflow's jobs; the
// job a push endpoint's answer spawns, and the step it recorded through
// the API; a pull worker's retry, with the step each attempt ran as a
// child of that attempt's span and the step the retry replayed as an
// event on it.
func TestTracingLinksBatchesWorkflowsAndSteps(t *testing.T) {
	otlp, query := startJaeger(t)
	var flintURL string // set once flint runs: the push endpoint records a step through its API
	var mu sync.Mutex
	var pushed []string // traceparent headers the endpoint received
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ID         string `json:"id"`
			LeaseToken string `json:"lease_token"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		pushed = append(pushed, r.Header.Get("traceparent"))
		mu.Unlock()
		step, _ := json.Marshal(map[string]any{"lease_token": body.LeaseToken, "name": "fetch", "result": 1,
			"started_at": time.Now().Add(-20 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
		req, _ := http.NewRequest(http.MethodPost, flintURL+"/api/v1/jobs/"+body.ID+"/steps", bytes.NewReader(step))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", testAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		if err != nil {
			http.Error(w, "recording the step: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"fetched": true, "spawn": [{"key": "child", "type": "noop"}]}`))
	}))
	defer receiver.Close()
	r := pythonRig(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp, "OTEL_SERVICE_NAME=flint-e2e", "OTEL_BSP_SCHEDULE_DELAY=100",
		"FLINT_HTTP_ALLOW="+strings.TrimPrefix(receiver.URL, "http://"))
	flintURL = r.url
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "durabletrace.py"), []byte(durableTraceJobs), 0o644))
	r.pythonWorker(t, "durabletrace")
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodPatch, "/api/v1/queues/hooks",
		map[string]any{"push": map[string]any{"url": receiver.URL + "/flint", "timeout_seconds": 10}}, nil))

	t.Run("batch", func(t *testing.T) { traceBatch(t, r, query) })
	t.Run("workflow", func(t *testing.T) { traceWorkflow(t, r, query) })
	t.Run("push", func(t *testing.T) {
		tracePush(t, r, query, func(tp string) bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(pushed, tp)
		})
	})
	t.Run("pull-worker-steps", func(t *testing.T) { tracePullSteps(t, r, query) })
}

// tracePush enqueues a job for the push endpoint, which records a step
// through the API and answers spawning a job: the step and the spawned
// job's attempt are children of the push's attempt span (the one the
// endpoint was handed, which pushed reports).
func tracePush(t *testing.T, r *workRig, query string, pushed func(traceparent string) bool) {
	const trace, caller = "7bf92f3577b34da6a3ce929d0e0e4701", "30f067aa0ba902b1"
	id := enqueueTraced(t, r, `{"type": "ok", "queue": "hooks"}`, "00-"+trace+"-"+caller+"-01")
	r.waitStatus(t, id, "completed")
	spans := waitSpans(t, query, trace, map[string]int{"flint run ok": 1, "flint step fetch": 1, "flint run noop": 1})
	run := spanNamed(t, spans, "flint run ok")
	require.True(t, pushed("00-"+trace+"-"+run.SpanID+"-01"), "the push carried the attempt's span")
	step := spanNamed(t, spans, "flint step fetch")
	require.Equal(t, run.SpanID, step.parent(), "the step the endpoint recorded is a child of the push's attempt")
	require.Equal(t, id, step.tag("flint.job.id"))
	require.Equal(t, "true", step.tag("flint.step.recorded"))
	require.Equal(t, "false", step.tag("flint.step.replayed"))
	child := spanNamed(t, spans, "flint run noop")
	require.Equal(t, run.SpanID, child.parent(), "the job the answer spawned continues the push's attempt")
}

// tracePullSteps enqueues py.durable: both attempts are children of the
// enqueue span, the step each ran a child of its span, and the step the
// retry replayed an event on the retry's span.
func tracePullSteps(t *testing.T, r *workRig, query string) {
	const trace, caller = "7bf92f3577b34da6a3ce929d0e0e4702", "30f067aa0ba902b2"
	id := enqueueTraced(t, r, `{"type": "py.durable"}`, "00-"+trace+"-"+caller+"-01")
	job := r.waitStatus(t, id, "completed")
	spans := waitSpans(t, query, trace, map[string]int{"flint run py.durable": 2, "flint step charge": 1, "flint step invoice": 1})
	enq := spanNamed(t, spans, "flint enqueue")
	runs := map[string]jaegerSpan{} // by attempt
	for _, s := range spans {
		if s.OperationName == "flint run py.durable" {
			require.Equal(t, enq.SpanID, s.parent(), "every attempt, the retry too, is a child of the enqueue span")
			runs[s.tag("flint.job.attempt")] = s
		}
	}
	require.Equal(t, "failed", runs["1"].tag("flint.job.outcome"))
	require.Equal(t, "succeeded", runs["2"].tag("flint.job.outcome"))
	require.Equal(t, "00-"+trace+"-"+runs["2"].SpanID+"-01", job["result"].(map[string]any)["traceparent"],
		"the retry ran as its attempt's span")
	charge, invoice := spanNamed(t, spans, "flint step charge"), spanNamed(t, spans, "flint step invoice")
	require.Equal(t, runs["1"].SpanID, charge.parent(), "the first attempt ran charge")
	require.Equal(t, runs["2"].SpanID, invoice.parent(), "the retry ran invoice")
	require.Equal(t, "2", invoice.tag("flint.step.seq"))
	require.Equal(t, "2", invoice.tag("flint.job.attempt"))
	require.Equal(t, []string{"charge"}, runs["2"].events("flint.step.name")["flint step replayed"], "the retry replayed charge")
	require.Empty(t, runs["1"].events("flint.step.name")["flint step replayed"])
}

// traceBatch creates a batch with an on_success callback under a trace of
// its own: its members and its callback, which Flint enqueues when the
// batch succeeds, run as children of the batch's enqueue span.
func traceBatch(t *testing.T, r *workRig, query string) {
	const trace, caller = "7bf92f3577b34da6a3ce929d0e0e4703", "30f067aa0ba902b3"
	var b struct {
		ID   string `json:"id"`
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, postTraced(t, r.url+"/api/v1/batches",
		`{"jobs": [{"type": "noop"}, {"type": "noop"}], "on_success": {"type": "noop"}}`, "00-"+trace+"-"+caller+"-01", &b))
	var callback string
	waitFor(t, 30*time.Second, "the batch's callback to complete", func() bool {
		var got struct {
			Callbacks map[string]struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"callbacks"`
		}
		r.api.do(t, http.MethodGet, "/api/v1/batches/"+b.ID, nil, &got)
		callback = got.Callbacks["on_success"].ID
		return got.Callbacks["on_success"].Status == "completed"
	})
	spans := waitSpans(t, query, trace, map[string]int{"flint run noop": 3})
	enq := spanNamed(t, spans, "flint enqueue")
	require.Equal(t, caller, enq.parent())
	require.Equal(t, b.ID, enq.tag("flint.batch.id"))
	require.Equal(t, "batch", enq.tag("flint.enqueue.via"))
	var ran []string
	for _, s := range spans {
		if s.OperationName == "flint run noop" {
			require.Equal(t, enq.SpanID, s.parent(), "job %s runs under the batch's enqueue span", s.tag("flint.job.id"))
			ran = append(ran, s.tag("flint.job.id"))
		}
	}
	want := []string{b.Jobs[0].ID, b.Jobs[1].ID, callback}
	slices.Sort(want)
	slices.Sort(ran)
	require.Equal(t, want, ran, "both members and the callback")
}

// traceWorkflow submits a workflow of two jobs, one depending on the
// other, under a trace of its own: both run as children of its enqueue
// span.
func traceWorkflow(t *testing.T, r *workRig, query string) {
	const trace, caller = "7bf92f3577b34da6a3ce929d0e0e4704", "30f067aa0ba902b4"
	var wf struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, postTraced(t, r.url+"/api/v1/workflows", `{"jobs": [
		{"key": "a", "type": "noop"}, {"key": "b", "type": "noop", "depends_on": ["a"]}]}`, "00-"+trace+"-"+caller+"-01", &wf))
	require.Len(t, wf.Jobs, 2)
	r.waitStatus(t, wf.Jobs[1].ID, "completed")
	spans := waitSpans(t, query, trace, map[string]int{"flint run noop": 2})
	enq := spanNamed(t, spans, "flint enqueue")
	require.Equal(t, caller, enq.parent())
	for _, s := range spans {
		if s.OperationName == "flint run noop" {
			require.Equal(t, enq.SpanID, s.parent(), "a workflow's jobs run under its enqueue span")
		}
	}
}

// waitSpans reads trace id from Jaeger until it holds at least the spans
// named in want (name → how many) and an enqueue span.
func waitSpans(t *testing.T, query, id string, want map[string]int) []jaegerSpan {
	t.Helper()
	var spans []jaegerSpan
	waitFor(t, 30*time.Second, "trace "+id+" in jaeger", func() bool {
		spans = jaegerTrace(t, query, id)
		n := map[string]int{}
		for _, s := range spans {
			n[s.OperationName]++
		}
		for name, c := range want {
			if n[name] < c {
				return false
			}
		}
		return n["flint enqueue"] > 0
	})
	return spans
}

// postTraced POSTs body to url with the bootstrap key and, unless empty,
// a traceparent header; it decodes the answer into out (when not nil)
// and returns the status.
func postTraced(t *testing.T, url, body, traceparent string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", testAPIKey)
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}
