package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The reference Python worker (clients/python/flint_worker.py) against a
// real `flint serve`: python3 processes register with a key that has only
// the work scope, run handlers, and are stopped with SIGTERM and SIGKILL.

// TestPythonWorkerRunsJobs: handlers complete jobs with their results, a
// failure is retried (at the delay Retry asked) or ends in the DLQ with
// the exception as its error, progress and log lines show through the
// API, and the worker shows in the registry as a Python worker.
//
//flint:long a Python worker's session against a real server, step after step, reads best top to bottom
func TestPythonWorkerRunsJobs(t *testing.T) {
	t.Parallel()
	r := pythonRig(t)
	// The API refuses the type until a worker serving it has registered.
	var refused apiError
	require.Equal(t, http.StatusUnprocessableEntity, r.api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "py.echo"}`, &refused))
	_, workerID := r.pythonWorker(t, "--concurrency", "4")

	var ws struct {
		Workers []map[string]any `json:"workers"`
	}
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/workers", nil, &ws))
	var seen map[string]any
	for _, w := range ws.Workers {
		if w["id"] == workerID {
			seen = w
		}
	}
	require.NotNil(t, seen, "the worker is in the registry: %v", ws.Workers)
	require.Equal(t, "python", seen["language"])
	require.Equal(t, []any{"py.broken", "py.echo", "py.extract", "py.fetch", "py.flaky", "py.gated", "py.nap", "py.order", "py.refund",
		"py.report", "py.resize", "py.square", "py.total", "py.work"}, seen["types"])

	var first map[string]any
	waitFor(t, 15*time.Second, "the API to accept the type its worker serves", func() bool {
		first = nil
		return r.api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "py.echo", "payload": {"n": 0}}`, &first) == http.StatusCreated
	})
	echoes := make([]string, 20)
	echoes[0] = first["id"].(string)
	for i := 1; i < len(echoes); i++ {
		echoes[i] = r.enqueue(t, fmt.Sprintf(`{"type": "py.echo", "payload": {"n": %d}}`, i))
	}
	// py.broken's handler declares a payload schema: the API refuses what
	// does not fit it, naming the field.
	require.Equal(t, http.StatusUnprocessableEntity, r.api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "py.broken", "payload": {"invoice": "7"}}`, &refused))
	require.Equal(t, "payload.invoice", refused.Error.Field, "%+v", refused)
	flaky := r.enqueue(t, `{"type": "py.flaky"}`)
	broken := r.enqueue(t, `{"type": "py.broken", "payload": {"invoice": "INV-7"}, "max_retries": 1}`)
	gated := r.enqueue(t, `{"type": "py.gated"}`)

	for i, id := range echoes {
		job := r.waitStatus(t, id, "completed")
		require.Equal(t, map[string]any{"echo": map[string]any{"n": float64(i)}, "attempt": 1.0}, job["result"])
	}
	job := r.waitStatus(t, flaky, "completed")
	require.Equal(t, map[string]any{"attempt": 2.0}, job["result"], "retried after the first attempt failed")
	require.Equal(t, "the first attempt fails", job["last_error"])
	job = r.waitStatus(t, broken, "dead_letter")
	require.Equal(t, 2.0, job["attempt"], "retried once, then dead")
	require.Equal(t, "ValueError: no such invoice INV-7", job["last_error"])

	// Progress shows while the job runs; the log has the handler's lines.
	waitFor(t, 30*time.Second, "the gated job's progress", func() bool {
		job = r.job(t, gated)
		return job["status"] == "running" && job["progress"] == 40.0
	})
	require.Equal(t, "halfway", job["progress_message"])
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o644))
	r.waitStatus(t, gated, "completed")

	var page struct {
		Entries []struct {
			Level   string         `json:"level"`
			Message string         `json:"message"`
			Source  string         `json:"source"`
			Attempt int            `json:"attempt"`
			Attrs   map[string]any `json:"attrs"`
		} `json:"entries"`
	}
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/jobs/"+echoes[3]+"/logs", nil, &page))
	var handlerLines int
	for _, e := range page.Entries {
		if e.Source == "handler" {
			handlerLines++
			require.Equal(t, "echoing", e.Message)
			require.Equal(t, "info", e.Level)
			require.Equal(t, 1, e.Attempt)
			require.Equal(t, map[string]any{"n": 3.0}, e.Attrs)
		}
	}
	require.Equal(t, 1, handlerLines, "%+v", page.Entries)
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/jobs/"+broken+"/logs", nil, &page))
	var traceback bool
	for _, e := range page.Entries {
		traceback = traceback || (e.Source == "handler" && e.Level == "error" && strings.Contains(e.Message, "Traceback"))
	}
	require.True(t, traceback, "an exception's traceback is in the job's log: %+v", page.Entries)
}

// TestPythonWorkerRidesOutARestart: while Flint restarts under it, the
// worker's claims, heartbeats and finishes fail; it backs off, carries on
// when Flint is back, and every job completes exactly once.
func TestPythonWorkerRidesOutARestart(t *testing.T) {
	t.Parallel()
	r := pythonRig(t, "FLINT_JOB_TYPES=py.work")
	const total = 30
	p, _ := r.pythonWorker(t, "--concurrency", "4")
	ids := make([]string, total)
	for i := range ids {
		ids[i] = r.enqueue(t, `{"type": "py.work", "payload": {"ms": 200}}`)
	}
	waitFor(t, 30*time.Second, "some jobs to complete", func() bool { return r.outcomes(t)["succeeded"] >= 4 })
	require.NoError(t, r.serve.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, r.serve.wait(t, 30*time.Second))
	waitFor(t, 30*time.Second, "the worker to notice", func() bool {
		out := p.out.String()
		return strings.Contains(out, "failed (") || strings.Contains(out, "heartbeat failed")
	})
	r.serve = startFlint(t, "serve", r.dbURL, r.env...)
	r.api.waitReady(t, 60*time.Second)
	for _, id := range ids {
		r.waitStatus(t, id, "completed")
	}
	var once int
	require.NoError(t, r.store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM (SELECT job_id FROM job_executions WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) = 1) j`).Scan(&once))
	require.Equal(t, total, once, "every job succeeded exactly once")
	require.Equal(t, total, r.outcomes(t)["succeeded"])
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t, 30*time.Second), "the worker is still healthy and stops cleanly")
}

// TestPythonWorkerUnitTests runs the Python worker's own unit tests.
func TestPythonWorkerUnitTests(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the reference Python worker is not tested")
	}
	cmd := exec.Command("python3", "-m", "unittest", "-v", "test_flint_worker")
	cmd.Dir = filepath.Join("..", "..", "clients", "python")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestPythonWorkerCarriesData: Python handlers read their parents'
// results (job.parent), fan out with job.spawn plus a join that adds up
// the fanned-out results, and a batch's callback reads the batch and its
// members' results (job.batch, job.parents).
func TestPythonWorkerCarriesData(t *testing.T) {
	t.Parallel()
	r := pythonRig(t)
	r.pythonWorker(t, "--concurrency", "4")
	var wf struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	waitFor(t, 15*time.Second, "the API to accept the types its worker serves", func() bool {
		return r.api.do(t, http.MethodPost, "/api/v1/workflows", `{"jobs": [
			{"key": "fetch", "type": "py.fetch", "payload": {"name": "cat.png"}},
			{"key": "resize", "type": "py.resize", "depends_on": ["fetch"]}]}`, &wf) == http.StatusCreated
	})
	job := r.waitStatus(t, wf.Jobs[1].ID, "completed")
	require.Equal(t, map[string]any{"thumb": "thumb-cat.png", "width": 128.0}, job["result"])

	r.waitStatus(t, r.enqueue(t, `{"type": "py.extract", "payload": {"numbers": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}}`), "completed")
	var page struct {
		Jobs []map[string]any `json:"jobs"`
	}
	waitFor(t, 30*time.Second, "the total to complete", func() bool {
		page.Jobs = nil
		r.api.do(t, http.MethodGet, "/api/v1/jobs?type=py.total&status=completed", nil, &page)
		return len(page.Jobs) == 1
	})
	require.Equal(t, map[string]any{"sum": 385.0}, page.Jobs[0]["result"])

	var batch map[string]any
	require.Equal(t, http.StatusCreated, r.api.do(t, http.MethodPost, "/api/v1/batches", `{
		"jobs": [{"type": "py.fetch", "payload": {"name": "a.png"}}, {"type": "py.fetch", "payload": {"name": "b.png"}}],
		"on_success": {"type": "py.report"}}`, &batch))
	id := batch["id"].(string)
	var cb string
	waitFor(t, 30*time.Second, "the batch's callback to be enqueued", func() bool {
		batch = nil
		r.api.do(t, http.MethodGet, "/api/v1/batches/"+id, nil, &batch)
		c, _ := batch["callbacks"].(map[string]any)["on_success"].(map[string]any)
		if c != nil && c["fired_at"] != nil {
			cb = c["id"].(string)
		}
		return cb != ""
	})
	job = r.waitStatus(t, cb, "completed")
	require.Equal(t, map[string]any{"batch": id, "members": 2.0, "completed": 2.0, "results": []any{"a.png", "b.png"}}, job["result"])
}
