package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// traceJobs is a Python handler that answers the traceparent its attempt
// was handed, so the test can check that the worker continued the trace.
const traceJobs = `
from flint_worker import handler

@handler("py.traced")
def traced(job):
    return {"traceparent": job.traceparent}
`

// TestTracingEndToEnd sends three requests, each with a traceparent of
// its own trace, to a `flint serve` exporting to a real Jaeger: one
// enqueues a job its own pool runs, one a job the Python worker runs and
// one a job pushed to an endpoint. Each trace, read back from Jaeger's
// query API, holds the enqueue span as a child of the caller's span and
// the attempt's span as a child of the enqueue span, with the job's id,
// type, queue, attempt and outcome; the Python handler and the push
// endpoint were handed the attempt's span as their traceparent. A fourth
// request with a malformed traceparent is served as if it had none.
func TestTracingEndToEnd(t *testing.T) {
	otlp, query := startJaeger(t)
	var pushMu sync.Mutex
	var pushed []string // traceparent headers the endpoint received
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pushMu.Lock()
		pushed = append(pushed, r.Header.Get("traceparent"))
		pushMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pushed": true}`))
	}))
	defer receiver.Close()
	r := pythonRig(t, "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp, "OTEL_SERVICE_NAME=flint-e2e", "OTEL_BSP_SCHEDULE_DELAY=100",
		"FLINT_HTTP_ALLOW="+strings.TrimPrefix(receiver.URL, "http://"))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "tracejobs.py"), []byte(traceJobs), 0o644))
	_, workerID := r.pythonWorker(t, "tracejobs")
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodPatch, "/api/v1/queues/hooks",
		map[string]any{"push": map[string]any{"url": receiver.URL + "/flint", "timeout_seconds": 10}}, nil))

	cases := []struct {
		name, body, trace, caller string
	}{
		{"in-process", `{"type": "noop"}`, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"python", `{"type": "py.traced"}`, "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"},
		{"push", `{"type": "ok", "queue": "hooks"}`, "6bf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9"},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = enqueueTraced(t, r, c.body, "00-"+c.trace+"-"+c.caller+"-01")
	}
	enqueueMalformed(t, r)
	jobsOut := make([]map[string]any, len(cases))
	for i, id := range ids {
		jobsOut[i] = r.waitStatus(t, id, "completed")
	}

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ := map[string]string{"in-process": "noop", "python": "py.traced", "push": "ok"}[c.name]
			var spans []jaegerSpan
			waitFor(t, 30*time.Second, "the "+c.name+" trace in jaeger", func() bool {
				spans = jaegerTrace(t, query, c.trace)
				names := map[string]bool{}
				for _, s := range spans {
					names[s.OperationName] = true
				}
				return names["flint enqueue"] && names["flint run "+typ]
			})
			enq := spanNamed(t, spans, "flint enqueue")
			require.Equal(t, c.caller, enq.parent(), "the enqueue span is a child of the caller's span")
			require.Equal(t, typ, enq.tag("flint.job.type"))
			require.Equal(t, ids[i], enq.tag("flint.job.id"))
			run := spanNamed(t, spans, "flint run "+typ)
			require.Equal(t, enq.SpanID, run.parent(), "the attempt's span is a child of the enqueue span")
			require.Equal(t, ids[i], run.tag("flint.job.id"))
			require.Equal(t, typ, run.tag("flint.job.type"))
			queue := "default"
			if c.name == "push" {
				queue = "hooks"
			}
			require.Equal(t, queue, run.tag("flint.job.queue"))
			require.Equal(t, "1", run.tag("flint.job.attempt"))
			require.Equal(t, "succeeded", run.tag("flint.job.outcome"))
			switch c.name {
			case "python":
				require.Equal(t, workerID, run.tag("flint.worker.id"))
				require.Equal(t, "true", run.tag("flint.worker.remote"))
				result := jobsOut[i]["result"].(map[string]any)
				require.Equal(t, "00-"+c.trace+"-"+run.SpanID+"-01", result["traceparent"],
					"the python handler ran as the attempt's span")
			case "push":
				pushMu.Lock()
				require.Contains(t, pushed, "00-"+c.trace+"-"+run.SpanID+"-01", "the push carried the attempt's span")
				pushMu.Unlock()
			}
		})
	}
}

// enqueueTraced posts body with a traceparent header and returns the new
// job's id.
func enqueueTraced(t *testing.T, r *workRig, body, traceparent string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.url+"/api/v1/jobs", bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", testAPIKey)
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var job map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&job))
	require.Equal(t, http.StatusCreated, resp.StatusCode, "traceparent %.60q: %v", traceparent, job)
	return fmt.Sprint(job["id"])
}

// enqueueMalformed enqueues jobs with malformed traceparent headers: they
// are ignored, never a 4xx, and the jobs run.
func enqueueMalformed(t *testing.T, r *workRig) {
	t.Helper()
	for _, bad := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01x", strings.Repeat("a", 5000)} {
		id := enqueueTraced(t, r, `{"type": "noop"}`, bad)
		r.waitStatus(t, id, "completed")
	}
}
