package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// These tests run the real flint binary as separate processes, kill and
// signal them, and check what the database says afterwards.

// TestCrashRecovery kills a worker process with SIGKILL mid-job. Its jobs
// must be reaped once their leases expire, rerun by another worker and
// completed; the killed attempt is recorded as interrupted and refunded.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	victim := startFlint(t, "worker", u, "FLINT_WORKER_ID=victim")
	js := enqueueAll(t, s, sleepJob(1500), sleepJob(1500), sleepJob(1500))
	waitJobs(t, s, js, 60*time.Second, func(j *jobs.Job) bool {
		return j.Status == jobs.StateRunning && j.WorkerID != nil && *j.WorkerID == "victim"
	})
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, victim.wait(t, 10*time.Second), "killed, not exited cleanly")

	startFlint(t, "scheduler", u)
	startFlint(t, "worker", u, "FLINT_WORKER_ID=rescuer")
	done := waitJobs(t, s, js, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	for _, j := range done {
		require.Equal(t, 1, j.Attempt, "the killed attempt was refunded")
		require.Equal(t, 1, j.Interruptions)
		require.Equal(t, 2, j.Executions)
		require.Equal(t, "rescuer", *j.WorkerID)
		ex, err := s.ListExecutions(context.Background(), j)
		require.NoError(t, err)
		require.Len(t, ex, 2)
		require.Equal(t, domain.OutcomeInterrupted, ex[0].Outcome)
		require.Equal(t, "victim", ex[0].WorkerID)
		require.Equal(t, domain.OutcomeSucceeded, ex[1].Outcome)
		require.Equal(t, "rescuer", ex[1].WorkerID)
	}
}

// TestGracefulDrain sends SIGTERM to a worker with jobs running: it exits 0,
// jobs that finish within the drain timeout complete, the rest go back to
// the queue without being charged an attempt.
func TestGracefulDrain(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	w := startFlint(t, "worker", u, "FLINT_DRAIN_TIMEOUT=5s", "FLINT_WORKER_ID=drainer")
	short := enqueueAll(t, s, sleepJob(1000), sleepJob(1000))
	long := enqueueAll(t, s, sleepJob(600000), sleepJob(600000))
	waitJobs(t, s, append(short, long...), 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateRunning })
	// Running in the database means claimed; a claimed job that has not yet
	// reached a worker goes back at once on shutdown, by design. Wait until
	// the worker says it started every handler (the short jobs sleep 1 s).
	waitFor(t, 30*time.Second, "the worker to start the four handlers", func() bool {
		return strings.Count(w.out.String(), `"msg":"job attempt started"`) == 4
	})
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, w.wait(t, 30*time.Second), "exit status 0 after a drain")

	for _, j := range waitJobs(t, s, short, time.Second, func(*jobs.Job) bool { return true }) {
		require.Equal(t, jobs.StateCompleted, j.Status)
	}
	for _, j := range waitJobs(t, s, long, time.Second, func(*jobs.Job) bool { return true }) {
		require.Equal(t, jobs.StateQueued, j.Status)
		require.Zero(t, j.Attempt)
		require.Zero(t, j.Interruptions)
		require.Nil(t, j.LeaseToken)
		ex, err := s.ListExecutions(context.Background(), j)
		require.NoError(t, err)
		require.Len(t, ex, 1)
		require.Equal(t, domain.OutcomeInterrupted, ex[0].Outcome)
	}
}

// TestServeEndToEnd runs `flint serve` and drives it over HTTP only.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	srv := startFlint(t, "serve", u, "FLINT_ADDR="+addr)
	base := "http://" + addr

	waitFor(t, 60*time.Second, "the server to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	post := func(path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	code, job := post("/api/v1/jobs", `{"type":"sleep","payload":{"ms":50},"priority":"high"}`)
	require.Equal(t, http.StatusCreated, code, "%v", job)
	id := uuid.MustParse(job["id"].(string))
	s := openStore(t, u)
	waitJobs(t, s, []*jobs.Job{{ID: id}}, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })

	// A failing job too, then the metrics after the run.
	code, _ = post("/api/v1/jobs", `{"type":"fail","max_retries":0,"queue":"metrics"}`)
	require.Equal(t, http.StatusCreated, code)
	wants := []string{
		`flint_jobs_finished_total{outcome="dead_letter",queue="metrics",type="fail"} 1`,
		`flint_jobs_finished_total{outcome="succeeded",queue="default",type="sleep"} 1`,
		`flint_job_duration_seconds_count{outcome="succeeded",type="sleep"} 1`,
		`flint_job_pickup_latency_seconds_count{queue="default"}`,
		`flint_jobs{queue="default",state="completed"} 1`,
		`flint_jobs{queue="metrics",state="dead_letter"} 1`,
		`flint_worker_capacity 4`,
		`flint_build_info{version="dev"} 1`,
		`flint_events_published_total`,
	}
	var metrics string
	missing := func() []string {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return wants
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		metrics = string(body)
		var out []string
		for _, w := range wants {
			if !strings.Contains(metrics, w) {
				out = append(out, w)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(missing()) == 0 }, 30*time.Second, 300*time.Millisecond,
		"metrics after the run lack %v", missing())
	require.NotContains(t, metrics, id.String(), "no job ids as labels")

	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.wait(t, 30*time.Second))
}

// TestBootWithRedisDown starts `flint serve` pointed at a Redis that is not
// there: it runs jobs from PostgreSQL, /healthz says Redis is down (status
// degraded) and /readyz stays ready.
func TestBootWithRedisDown(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := dead.Addr().String()
	require.NoError(t, ln.Close())
	require.NoError(t, dead.Close())
	srv := startFlint(t, "serve", u, "FLINT_ADDR="+addr, "REDIS_URL=redis://"+deadAddr+"/0", "FLINT_READY_QUEUE=redis")
	base := "http://" + addr
	var ready *http.Response
	require.Eventually(t, func() bool {
		ready, err = http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		ready.Body.Close()
		return ready.StatusCode == http.StatusOK
	}, 60*time.Second, 100*time.Millisecond)
	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	var health map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&health))
	resp.Body.Close()
	require.Equal(t, "degraded", health["status"])
	require.Equal(t, "down", health["redis"])
	require.Equal(t, "ok", health["database"])

	s := openStore(t, u)
	js := enqueueAll(t, s, sleepJob(10), sleepJob(10))
	waitJobs(t, s, js, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.wait(t, 30*time.Second))
}

// TestCommandLine: help is asked for in the usual ways and answered with
// the commands (exit 0); arguments a command does not take are refused
// with a message that names them (exit 2).
func TestCommandLine(t *testing.T) {
	t.Parallel()
	run := func(args ...string) (string, int) {
		cmd := exec.Command(flintBinary(t), args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=postgres://nobody@127.0.0.1:1/none")
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return string(out), code
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, code := run(args...)
		require.Zero(t, code, args)
		require.Contains(t, out, "Commands:", args)
		require.Contains(t, out, "scheduler", args)
	}
	out, code := run("worker", "-h")
	require.Zero(t, code)
	require.Contains(t, out, "-workers")
	out, code = run("bench", "history")
	require.Equal(t, 2, code)
	require.Contains(t, out, "-jobs: give how many finished jobs to write")
	out, code = run("bench", "history", "--jobs", "20", "more")
	require.Equal(t, 2, code)
	require.Contains(t, out, `unexpected argument "more"`)
	out, code = run("bench", "--n", "10", "history")
	require.Equal(t, 2, code)
	require.Contains(t, out, `unexpected argument "history"`)

	// The history seeder fills a real database.
	u := dbtest.NewDatabase(t)
	seed := exec.Command(flintBinary(t), "bench", "history", "--jobs", "120", "--days", "3")
	seed.Env = append(os.Environ(), "DATABASE_URL="+u)
	seeded, err := seed.CombinedOutput()
	require.NoError(t, err, string(seeded))
	require.Contains(t, string(seeded), "120 of 120 finished jobs written")
	var n int
	count := `SELECT count(*) FROM (SELECT finished_at FROM jobs UNION ALL SELECT finished_at FROM job_history) j WHERE finished_at IS NOT NULL`
	require.NoError(t, openStore(t, u).Pool().QueryRow(context.Background(), count).Scan(&n))
	require.Equal(t, 120, n)

	// drop-day removes the oldest day of completed jobs and says so.
	drop := exec.Command(flintBinary(t), "bench", "drop-day")
	drop.Env = seed.Env
	dropped, err := drop.CombinedOutput()
	require.NoError(t, err, string(dropped))
	require.Regexp(t, `removed \d{4}-\d\d-\d\d's (\d+) completed jobs by dropping its history partition in `, string(dropped))
	gone, _ := strconv.Atoi(regexp.MustCompile(`'s (\d+) completed`).FindStringSubmatch(string(dropped))[1])
	require.Positive(t, gone)
	require.NoError(t, openStore(t, u).Pool().QueryRow(context.Background(), count).Scan(&n))
	require.Equal(t, 120-gone, n)
	out, code = run("bench", "drop-day", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, out, `unexpected argument "extra"`)
	out, code = run("worker", "extra")
	require.Equal(t, 2, code)
	require.Contains(t, out, `unexpected argument "extra"`)
	out, code = run("frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, out, `unknown command "frobnicate"`)
}

// TestImageLogsToStdoutAndTheDatabase: the container image writes no log
// file (the Logs page reads the database, and the runtime collects
// stdout), so it needs no writable directory; FLINT_LOG_FILE still adds a
// file for hosts without a log collector.
func TestImageLogsToStdoutAndTheDatabase(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	df := string(b)
	require.NotRegexp(t, `(?m)^\s*(ENV\s+)?FLINT_LOG_FILE=`, df)
	require.NotContains(t, df, "/var/log")

	dir := filepath.Join(t.TempDir(), "log")
	require.NoError(t, os.Mkdir(dir, 0o755))
	cmd := exec.Command(flintBinary(t), "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.NewDatabase(t), "FLINT_LOG_FILE="+filepath.Join(dir, "flint.log"), "LOG_LEVEL=info")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), `"role":"migrate"`, "stdout")
	logged, err := os.ReadFile(filepath.Join(dir, "flint.log"))
	require.NoError(t, err)
	require.Contains(t, string(logged), `"role":"migrate"`)
}

// TestLogsOfEveryProcess runs an API process and a worker process, each
// logging to stdout only (as in the container image), on one database:
// the API's log endpoint returns the entries of both, narrowed to one
// process on request, down to the worker's last words as it stops.
func TestLogsOfEveryProcess(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	apiProc := startFlint(t, "api", u, "FLINT_ADDR="+addr, "FLINT_WORKER_ID=api-one")
	apiProc.ready(t, 60*time.Second)
	worker := startFlint(t, "worker", u, "FLINT_WORKER_ID=worker-one")
	worker.ready(t, 60*time.Second)

	type entry struct {
		Msg       string `json:"msg"`
		Level     string `json:"level"`
		ProcessID string `json:"process_id"`
		Role      string `json:"role"`
		Host      string `json:"host"`
	}
	read := func(query string) []entry {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/logs?limit=500&"+query, nil)
		req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out struct{ Entries []entry }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out.Entries
	}
	started := func(es []entry, process string) bool {
		for _, e := range es {
			if e.Msg == "flint started" && e.ProcessID == process {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		all := read("")
		return started(all, "api-one") && started(all, "worker-one")
	}, 30*time.Second, 100*time.Millisecond, "both processes' start is in the log")

	host, _ := os.Hostname()
	onWorker := read("process=worker-one")
	require.NotEmpty(t, onWorker)
	for _, e := range onWorker {
		require.Equal(t, entry{Msg: e.Msg, Level: e.Level, ProcessID: "worker-one", Role: "worker", Host: host}, e)
	}
	require.False(t, started(onWorker, "api-one"))

	require.NoError(t, worker.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, worker.wait(t, 30*time.Second))
	last := read("process=worker-one")[0]
	require.Equal(t, "flint stopped", last.Msg, "a stopping process stores its last entries")
}
