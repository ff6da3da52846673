package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/syncbuf"
	"github.com/flinthq/flint/jobs"
)

// pythonBenchJobs are the Python handlers of BenchmarkPythonWorkers.
const pythonBenchJobs = `
import time
from flint_worker import handler

@handler("py.noop")
def noop(job):
    return None

@handler("py.probe")
def probe(job):
    return {"pickup_ms": (time.time_ns() - job.payload["at"]) / 1e6}
`

// pythonBenchSettings are the benchmark's worker options; FLINT_BENCH_PYTHON
// replaces them.
const pythonBenchSettings = "--concurrency 4 --prefetch 396 --claimers 2"

// BenchmarkPythonWorkers compares, against one `flint serve` and one
// PostgreSQL database in the same run, how fast two processes of the
// reference Python worker (clients/python, claims of 100, batched
// finishes) drain 20,000 jobs with how fast the serve process's own
// in-process pool drains 20,000 noop jobs; then the idle pickup latency of
// those Python workers while they long-poll (one job every 20 ms, enqueue
// to handler start). Each drain starts when its paused queue is resumed.
//
//	make bench-python                 # FLINT_BENCH_PYTHON="--claimers 4 ..." to try other settings
func BenchmarkPythonWorkers(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed")
	}
	bin := buildFlint(b, false)
	for b.Loop() {
		b.StopTimer()
		inproc, remote, p50, p99, inprocP50 := pythonBenchRun(b, bin, 20_000)
		b.Logf("in-process %.0f jobs/s, python %.0f jobs/s, ratio %.2f; python idle pickup p50 %.1f ms, p99 %.1f ms "+
			"(in-process pool, enqueue to claim: p50 %.1f ms)", inproc, remote, remote/inproc, p50, p99, inprocP50)
		b.ReportMetric(inproc, "inproc-jobs/s")
		b.ReportMetric(remote, "python-jobs/s")
		b.ReportMetric(remote/inproc, "ratio")
		b.ReportMetric(p50, "pickup-p50-ms")
		b.ReportMetric(p99, "pickup-p99-ms")
		b.ReportMetric(inprocP50, "inproc-pickup-p50-ms")
		b.StartTimer()
	}
}

//flint:long one benchmark run (start the processes, load, measure, tear down) reads best in the order it happens
func pythonBenchRun(b *testing.B, bin string, total int) (inproc, remote, p50, p99, inprocP50 float64) {
	ctx := context.Background()
	store, dbURL := dbtest.NewStore(b)
	defer store.Close()
	addr := freeAddrB(b)
	base := "http://" + addr
	// The round's processes stop when it ends, so that an idle server
	// and long-polling workers of one round take nothing from the next.
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	run := func(cmd *exec.Cmd) {
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if b.Failed() {
				b.Logf("%s output:\n%s", filepath.Base(cmd.Path), out.String())
			}
		})
	}
	serve := exec.Command(bin, "serve")
	serve.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL=", "FLINT_ADDR="+addr, "FLINT_API_KEY="+testAPIKey,
		"FLINT_LOG_FILE=-", "LOG_LEVEL=error", "FLINT_JOB_TYPES=py.noop,py.probe")
	run(serve)
	api := &apiClient{base: base, key: testAPIKey, http: &http.Client{Timeout: time.Minute}}
	call := func(method, path, body string, out any) {
		var status int
		pollUntil(time.Minute, 100*time.Millisecond, func() bool {
			status = api.doB(b, method, path, body, out)
			return status < 300
		})
		if status >= 300 {
			b.Fatalf("%s %s: %d", method, path, status)
		}
	}
	waitUntil := func(what string, cond func() bool) {
		if !pollUntil(5*time.Minute, 10*time.Millisecond, cond) {
			b.Fatalf("timed out waiting for %s", what)
		}
	}
	waitUntil("flint serve to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	completed := func(typ string) int { return completedCount(b, store, typ) }
	// drain enqueues n jobs of typ into the paused queue "bench", resumes
	// it and returns the rate at which they complete.
	drain := func(typ string, n int) float64 {
		call(http.MethodPost, "/api/v1/queues/bench/pause", "", nil)
		before := completed(typ)
		batch := make([]jobs.EnqueueParams, 5000)
		for i := range batch {
			batch[i] = jobs.EnqueueParams{Type: typ, Queue: "bench"}
		}
		for range n / len(batch) {
			if _, err := store.Enqueue(ctx, batch...); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		call(http.MethodPost, "/api/v1/queues/bench/resume", "", nil)
		waitUntil(typ+" jobs to complete", func() bool { return completed(typ)-before == n })
		return float64(n) / time.Since(start).Seconds()
	}

	drain(jobs.TypeNoop, 5000) // warms the server and the database up
	const probes = 200
	inproc = drain(jobs.TypeNoop, total)
	// For comparison, the in-process pool's idle pickup, as the database
	// saw it (created to claimed; the Python probes below measure up to
	// the handler's start, which is a little more).
	probe := func(typ string, payload func() json.RawMessage) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range probes {
			<-tick.C
			if _, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: typ, Payload: payload()}); err != nil {
				b.Fatal(err)
			}
		}
		waitUntil(typ+" probes to complete", func() bool { return completed(typ) >= probes })
	}
	probe("sleep", func() json.RawMessage { return json.RawMessage(`{"ms": 0}`) })
	inprocP50 = claimLatencyP50(b, store, "sleep")

	var key struct {
		Secret string `json:"secret"`
	}
	call(http.MethodPost, "/api/v1/keys", `{"name": "python-bench", "scopes": ["work"]}`, &key)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "benchjobs.py"), []byte(pythonBenchJobs), 0o644); err != nil {
		b.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "clients", "python", "flint_worker.py"))
	if err != nil {
		b.Fatal(err)
	}
	settings := strings.Fields(cmp.Or(os.Getenv("FLINT_BENCH_PYTHON"), pythonBenchSettings))
	for i := range 2 {
		args := append([]string{script, "--url", base, "--log-level", "warning", "--name", fmt.Sprintf("bench-%d", i)}, settings...)
		cmd := exec.Command("python3", append(args, "benchjobs")...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "FLINT_API_KEY="+key.Secret)
		run(cmd)
	}
	waitUntil("two python workers to register", func() bool {
		var ws struct {
			Workers []domain.WorkerInfo `json:"workers"`
		}
		api.doB(b, http.MethodGet, "/api/v1/workers", "", &ws)
		return len(slices.DeleteFunc(ws.Workers, func(w domain.WorkerInfo) bool { return w.Language != "python" })) == 2
	})
	remote = drain("py.noop", total)

	// Idle pickup: the workers wait in long polls; a job every 20 ms.
	probe("py.probe", func() json.RawMessage {
		payload, _ := json.Marshal(map[string]int64{"at": time.Now().UnixNano()})
		return payload
	})
	lat := pickupLatencies(b, store)
	b.Logf("python probes, enqueue to claim as the database saw it: p50 %.1f ms", claimLatencyP50(b, store, "py.probe"))
	return inproc, remote, lat[len(lat)/2], lat[len(lat)*99/100], inprocP50
}

// pickupLatencies returns the probes' pickup latencies in ms, sorted.
func pickupLatencies(b *testing.B, store *db.Store) []float64 {
	rows, err := store.Pool().Query(context.Background(), `SELECT (result->>'pickup_ms')::float8 FROM jobs WHERE type = 'py.probe'`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []float64
	for rows.Next() {
		var ms float64
		if err := rows.Scan(&ms); err != nil {
			b.Fatal(err)
		}
		out = append(out, ms)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// claimLatencyP50 is the median time from enqueue to claim of the jobs of
// typ, by the database's clock, in ms.
func claimLatencyP50(b *testing.B, store *db.Store, typ string) float64 {
	var ms float64
	if err := store.Pool().QueryRow(context.Background(),
		`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - created_at) * 1000) FROM jobs WHERE type = $1`,
		typ).Scan(&ms); err != nil {
		b.Fatal(err)
	}
	return ms
}

// freeAddrB is freeAddr for benchmarks.
func freeAddrB(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// doB is apiClient.do for benchmarks: it returns the status, decoding a
// 2xx answer into out.
func (c *apiClient) doB(b *testing.B, method, path, body string, out any) int {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			b.Fatal(err)
		}
	}
	return resp.StatusCode
}
