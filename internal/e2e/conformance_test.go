package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkerConformance holds every pull worker client to the wire
// contract, the same scenarios for each (docs/conformance.md says how a
// client in another language runs them): claim and finish in batches,
// logs and progress, parents and spawn, durable steps, sleeps and waits,
// a lost lease, the heartbeat's quiet/terminate/lost answers, SIGTERM,
// SIGKILL, deregistration.
func TestWorkerConformance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs worker processes against flint serve")
	}
	scenarios := []struct {
		name string
		run  func(t *testing.T, impl workerImpl)
	}{
		{"RunsJobs", conformRunsJobs},
		{"CarriesData", conformCarriesData},
		{"Durable", conformDurable},
		{"StopsOnLostLease", conformLostLease},
		{"FollowsOperators", conformOperators},
		{"DrainsOnSIGTERM", conformSIGTERM},
		{"HandsBackOnSecondSIGTERM", conformSecondSIGTERM},
		{"SIGKILLLosesNothing", conformSIGKILL},
	}
	for _, impl := range conformanceWorkers(t) {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, impl)
				})
			}
		})
	}
}

// conformanceTypes are the job types a conforming worker serves.
var conformanceTypes = []any{"conformance.broken", "conformance.echo", "conformance.fanout", "conformance.fetch", "conformance.flaky",
	"conformance.gated", "conformance.nap", "conformance.order", "conformance.paid", "conformance.refund", "conformance.reorder",
	"conformance.resize", "conformance.square", "conformance.total", "conformance.work"}

const conformanceTypesEnv = "FLINT_JOB_TYPES=conformance.broken,conformance.echo,conformance.fanout,conformance.fetch,conformance.flaky," +
	"conformance.gated,conformance.nap,conformance.order,conformance.paid,conformance.refund,conformance.reorder," +
	"conformance.resize,conformance.square,conformance.total,conformance.work"

// marksOf lists the marks of kind the handlers left for the job.
func (r *confRig) marksOf(t *testing.T, kind, id string) []string {
	t.Helper()
	return r.marks(t, kind+"-"+id)
}

func (r *confRig) release(t *testing.T) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "release"), nil, 0o644))
}

// registered reports whether the worker is still in the registry.
func (r *confRig) registered(t *testing.T, id string) bool {
	t.Helper()
	var n int
	require.NoError(t, r.store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM workers WHERE id = $1`, id).Scan(&n))
	return n > 0
}

// conformRunsJobs: the worker registers its types, claims in batches
// with long polls, completes jobs with their results, retries and
// dead-letters as asked, reports progress in heartbeats, sends log lines,
// and finishes many jobs in one request.
//
//flint:long one worker's session against a real server, step after step, reads best top to bottom
func conformRunsJobs(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	_, workerID := r.start(t, "runs-jobs", 8)
	var ws struct {
		Workers []map[string]any `json:"workers"`
	}
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/workers", nil, &ws))
	i := slices.IndexFunc(ws.Workers, func(w map[string]any) bool { return w["id"] == workerID })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, conformanceTypes, ws.Workers[i]["types"])
	require.NotEmpty(t, ws.Workers[i]["language"])

	const echoes = 60
	batch := make([]map[string]any, echoes)
	for i := range batch {
		batch[i] = map[string]any{"type": "conformance.echo", "payload": map[string]any{"n": i}}
	}
	var made struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, r.api.do(t, http.MethodPost, "/api/v1/jobs/batch", map[string]any{"jobs": batch}, &made))
	// The registration declared conformance.broken's payload schema: the
	// API refuses a payload that does not fit, naming the field.
	var refused apiError
	require.Equal(t, http.StatusUnprocessableEntity, r.api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "conformance.broken", "payload": {"message": 7}}`, &refused))
	require.Equal(t, "payload.message", refused.Error.Field, "%+v", refused)
	flaky := r.enqueue(t, `{"type": "conformance.flaky"}`)
	broken := r.enqueue(t, `{"type": "conformance.broken", "payload": {"message": "no such invoice INV-7"}}`)
	gated := r.enqueue(t, `{"type": "conformance.gated"}`)

	for i, j := range made.Jobs {
		job := r.waitStatus(t, j.ID, "completed")
		require.Equal(t, map[string]any{"echo": map[string]any{"n": float64(i)}, "attempt": 1.0}, job["result"])
	}
	job := r.waitStatus(t, flaky, "completed")
	require.Equal(t, map[string]any{"attempt": 2.0}, job["result"], "retried after the first attempt failed")
	require.Equal(t, "the first attempt fails", job["last_error"])
	job = r.waitStatus(t, broken, "dead_letter")
	require.Equal(t, 1.0, job["attempt"], "a failure for good is not retried")
	require.Equal(t, "no such invoice INV-7", job["last_error"])

	waitFor(t, 30*time.Second, "the gated job's progress", func() bool {
		job = r.job(t, gated)
		return job["status"] == "running" && job["progress"] == 40.0
	})
	require.Equal(t, "halfway", job["progress_message"])
	r.release(t)
	job = r.waitStatus(t, gated, "completed")
	require.Equal(t, map[string]any{"released": true}, job["result"])

	var page struct {
		Entries []struct {
			Level, Message, Source string
			Attempt                int
			Attrs                  map[string]any
		} `json:"entries"`
	}
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/jobs/"+made.Jobs[3].ID+"/logs", nil, &page))
	var lines int
	for _, e := range page.Entries {
		if e.Source == "handler" {
			lines++
			require.Equal(t, "echoing", e.Message)
			require.Equal(t, "info", e.Level)
			require.Equal(t, 1, e.Attempt)
			require.Equal(t, map[string]any{"n": 3.0}, e.Attrs)
		}
	}
	require.Equal(t, 1, lines, "%+v", page.Entries)

	// The wire: batched long-poll claims, batched finishes, progress in a heartbeat.
	var longPoll, batched bool
	for _, c := range r.wire.of("/claim") {
		wait, _ := c.body["wait_seconds"].(float64)
		most, _ := c.body["max"].(float64)
		longPoll = longPoll || wait > 0
		batched = batched || most > 1
	}
	require.True(t, longPoll, "claims wait for work (wait_seconds > 0)")
	require.True(t, batched, "claims ask for more than one job")
	var most int
	for _, c := range r.wire.of("/finish") {
		outcomes, _ := c.body["outcomes"].([]any)
		most = max(most, len(outcomes))
	}
	require.GreaterOrEqual(t, most, 2, "outcomes that pile up go in one finish")
	progress := slices.ContainsFunc(r.wire.of("/heartbeat"), func(c wireCall) bool {
		leases, _ := c.body["leases"].([]any)
		return slices.ContainsFunc(leases, func(l any) bool {
			m, _ := l.(map[string]any)
			return m["job_id"] == gated && m["progress"] == 40.0 && m["progress_message"] == "halfway"
		})
	})
	require.True(t, progress, "the progress went out with a heartbeat")
}

// conformCarriesData: handlers read their parents' results and grow
// their workflow with spawned jobs and a join.
func conformCarriesData(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	r.start(t, "carries-data", 4)
	var wf struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, r.api.do(t, http.MethodPost, "/api/v1/workflows", `{"jobs": [
		{"key": "fetch", "type": "conformance.fetch", "payload": {"name": "cat.png"}},
		{"key": "resize", "type": "conformance.resize", "depends_on": ["fetch"]}]}`, &wf))
	job := r.waitStatus(t, wf.Jobs[1].ID, "completed")
	require.Equal(t, map[string]any{"thumb": "thumb-cat.png", "width": 128.0}, job["result"])

	job = r.waitStatus(t, r.enqueue(t, `{"type": "conformance.fanout", "payload": {"numbers": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}}`), "completed")
	require.Equal(t, map[string]any{"squares": 10.0}, job["result"])
	var page struct {
		Jobs []map[string]any `json:"jobs"`
	}
	waitFor(t, 30*time.Second, "the total to complete", func() bool {
		page.Jobs = nil
		r.api.do(t, http.MethodGet, "/api/v1/jobs?type=conformance.total&status=completed", nil, &page)
		return len(page.Jobs) == 1
	})
	require.Equal(t, map[string]any{"sum": 385.0}, page.Jobs[0]["result"])
}

// conformLostLease: a job whose lease Flint took back (here: expired
// under a live worker) is stopped by the worker, which does not complete
// it; the job runs again and completes exactly once.
func conformLostLease(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	r.start(t, "lost-lease", 4)
	gated := r.enqueue(t, `{"type": "conformance.gated"}`)
	waitFor(t, 30*time.Second, "the gated job to start", func() bool { return len(r.marksOf(t, "start", gated)) == 1 })
	// The lease expires, and a new token keeps the worker's next heartbeat
	// from renewing it before the reaper comes by.
	_, err := r.store.Pool().Exec(context.Background(),
		`UPDATE jobs SET lease_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second'
		 WHERE id = $1 AND status = 'running'`, gated)
	require.NoError(t, err)
	waitFor(t, 30*time.Second, "the worker to stop the handler whose lease was lost", func() bool {
		return len(r.marksOf(t, "stopped", gated)) == 1
	})
	waitFor(t, 30*time.Second, "the job to run again", func() bool { return len(r.marksOf(t, "start", gated)) == 2 })
	r.release(t)
	job := r.waitStatus(t, gated, "completed")
	require.Equal(t, 1.0, job["attempt"], "the interrupted attempt was refunded")
	require.Len(t, r.marksOf(t, "done", gated), 1, "only the run that held the lease finished")
	require.Equal(t, map[string]int{"succeeded": 1, "interrupted": 1}, r.outcomes(t))
}

// conformOperators: a cancelled running job is stopped (the heartbeat
// names it lost) and ends cancelled; a quieted worker claims nothing
// more but keeps its jobs' leases; terminate stops it as SIGTERM does.
func conformOperators(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	p, workerID := r.start(t, "operated", 2)
	cancelled := r.enqueue(t, `{"type": "conformance.gated"}`)
	waitFor(t, 30*time.Second, "the gated job to start", func() bool { return len(r.marksOf(t, "start", cancelled)) == 1 })
	require.Equal(t, http.StatusAccepted, r.api.do(t, http.MethodPost, "/api/v1/jobs/"+cancelled+"/cancel", nil, nil))
	job := r.waitStatus(t, cancelled, "cancelled")
	require.Equal(t, 1.0, job["attempt"])
	waitFor(t, 10*time.Second, "the worker to stop the cancelled handler", func() bool {
		return len(r.marksOf(t, "stopped", cancelled)) == 1
	})

	held := r.enqueue(t, `{"type": "conformance.gated"}`)
	waitFor(t, 30*time.Second, "a second gated job to start", func() bool { return len(r.marksOf(t, "start", held)) == 1 })
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodPost, "/api/v1/workers/"+workerID+"/quiet", nil, nil))
	quietAnswers := func() []wireCall {
		return slices.DeleteFunc(r.wire.of("/heartbeat"), func(c wireCall) bool { return c.answer["state"] != "quiet" })
	}
	waitFor(t, 10*time.Second, "two heartbeats answered quiet", func() bool { return len(quietAnswers()) >= 2 })
	echo := r.enqueue(t, `{"type": "conformance.echo"}`)
	told := quietAnswers()[1].end
	waitFor(t, 10*time.Second, "two more heartbeats", func() bool { return len(quietAnswers()) >= 4 })
	for _, c := range r.wire.of("/claim") {
		require.False(t, c.start.After(told), "a claim began after the worker was told to quiet down")
	}
	r.release(t)
	job = r.waitStatus(t, held, "completed")
	require.Equal(t, 1.0, job["attempt"], "a quiet worker still holds and finishes its jobs")

	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodPost, "/api/v1/workers/"+workerID+"/terminate", nil, nil))
	require.NoError(t, p.wait(t, 30*time.Second), "terminate stops the worker cleanly")
	require.False(t, r.registered(t, workerID), "deregistered")
	job = r.job(t, echo)
	require.Equal(t, "queued", job["status"], "a quiet worker claims nothing")
	require.Equal(t, 0.0, job["attempt"])
	require.Empty(t, r.marksOf(t, "done", cancelled), "the cancelled handler was stopped")
}

// conformSIGTERM: SIGTERM stops claiming; the jobs held, their leases
// kept past the lease TTL by heartbeats, run to completion; the worker
// deregisters and exits 0; jobs enqueued after it stopped claiming stay
// queued with no attempt charged.
func conformSIGTERM(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	p, workerID := r.start(t, "drained", 4)
	held := make([]string, 3)
	for i := range held {
		held[i] = r.enqueue(t, `{"type": "conformance.gated"}`)
	}
	waitFor(t, 30*time.Second, "three gated jobs to start", func() bool { return len(r.marks(t, "start")) == 3 })
	waitFor(t, 30*time.Second, "leases held past their TTL", func() bool {
		var n int
		require.NoError(t, r.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM jobs WHERE status = 'running' AND worker_id = $1 AND started_at < now() - interval '2500 ms'
			   AND lease_expires_at > now()`, workerID).Scan(&n))
		return n == 3
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	waitFor(t, 10*time.Second, "the worker to say it claims no more", func() bool {
		return strings.Contains(p.out.String(), "no more claims")
	})
	late := make([]string, 3)
	for i := range late {
		late[i] = r.enqueue(t, `{"type": "conformance.echo"}`)
	}
	select {
	case <-p.done:
		t.Fatalf("the worker exited before its jobs finished: %v", p.err)
	default:
	}
	r.release(t)
	require.NoError(t, p.wait(t, 30*time.Second), "a graceful stop exits 0")
	for _, id := range held {
		job := r.job(t, id)
		require.Equal(t, "completed", job["status"])
		require.Equal(t, 1.0, job["attempt"])
	}
	for _, id := range late {
		job := r.job(t, id)
		require.Equal(t, "queued", job["status"], "not run by a stopping worker")
		require.Equal(t, 0.0, job["attempt"], "no attempt charged")
	}
	require.Equal(t, map[string]int{"succeeded": 3}, r.outcomes(t))
	require.False(t, r.registered(t, workerID), "deregistered")
}

// conformSecondSIGTERM: a second SIGTERM stops the worker at once: it
// deregisters and exits 0 without waiting for its handlers, and the jobs
// it held go back to their queue at once with no attempt charged.
func conformSecondSIGTERM(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	p, workerID := r.start(t, "impatient", 4)
	held := []string{r.enqueue(t, `{"type": "conformance.gated"}`), r.enqueue(t, `{"type": "conformance.gated"}`)}
	waitFor(t, 30*time.Second, "two gated jobs to start", func() bool { return len(r.marks(t, "start")) == 2 })
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	waitFor(t, 10*time.Second, "the worker to say it claims no more", func() bool {
		return strings.Contains(p.out.String(), "no more claims")
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t, 30*time.Second), "a stop at once still exits 0")
	require.False(t, r.registered(t, workerID), "deregistered")
	for _, id := range held {
		job := r.job(t, id)
		require.Equal(t, "queued", job["status"], "handed back, not left to the reaper")
		require.Equal(t, 0.0, job["attempt"], "no attempt charged")
	}
	require.Empty(t, r.marks(t, "done"), "no handler finished")
}

// conformSIGKILL: a worker killed with SIGKILL while it runs jobs loses
// none of them and none completes twice: once its leases expire, another
// worker runs them, and each job has exactly one successful execution.
func conformSIGKILL(t *testing.T, impl workerImpl) {
	r := newConfRig(t, impl, conformanceTypesEnv)
	const total = 40
	a, aID := r.start(t, "doomed", 8)
	ids := make([]string, total)
	for i := range ids {
		ids[i] = r.enqueue(t, `{"type": "conformance.work", "payload": {"ms": 500}}`)
	}
	// Killed while it runs jobs, after it has finished others (a window
	// of seconds: 40 jobs of 500 ms, 8 at a time).
	waitFor(t, 30*time.Second, "the first worker to finish some jobs and hold others", func() bool {
		var running, completed int
		require.NoError(t, r.store.Pool().QueryRow(context.Background(),
			`SELECT count(*) FILTER (WHERE status = 'running' AND worker_id = $1),
			        count(*) FILTER (WHERE status = 'completed') FROM jobs`, aID).Scan(&running, &completed))
		return running > 0 && completed > 0
	})
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	_ = a.wait(t, 10*time.Second)
	r.start(t, "survivor", 8)
	for _, id := range ids {
		job := r.waitStatus(t, id, "completed")
		require.Equal(t, 1.0, job["attempt"], "the killed attempt was refunded")
	}
	var doubled, killed int
	require.NoError(t, r.store.Pool().QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM (SELECT job_id FROM job_executions WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) <> 1) d),
		        (SELECT count(*) FROM job_executions WHERE outcome = 'interrupted' AND worker_id = $1)`, aID).Scan(&doubled, &killed))
	require.Zero(t, doubled, "every job completed exactly once")
	require.Positive(t, killed, "the jobs the killed worker held were reaped as interrupted")
	out := r.outcomes(t)
	require.Equal(t, map[string]int{"succeeded": total, "interrupted": out["interrupted"]}, out)
	starts := len(r.marks(t, "start"))
	require.GreaterOrEqual(t, starts, total)
	require.LessOrEqual(t, starts, total+out["interrupted"], fmt.Sprintf("each run is a success or an interruption (%v)", out))
}
