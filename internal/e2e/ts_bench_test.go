package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/syncbuf"
	"github.com/flinthq/flint/jobs"
)

// tsBenchJobs are the TypeScript handlers of BenchmarkTypeScriptWorkers.
const tsBenchJobs = `export default { "ts.noop": () => null };
`

// BenchmarkTypeScriptWorkers compares, against one flint serve and one
// PostgreSQL database in the same run, how fast two processes of the
// TypeScript worker (clients/typescript) and two of the reference Python
// worker drain 20,000 jobs each, with the same settings
// (pythonBenchSettings: 4 handlers, 396 prefetched, 2 claimers). Each
// drain starts when its paused queue is resumed; only the pair being
// measured runs, and the order alternates between rounds.
//
//	go test -run '^$' -bench TypeScriptWorkers -benchtime 2x ./internal/e2e/
func BenchmarkTypeScriptWorkers(b *testing.B) {
	if _, err := exec.LookPath("python3"); err != nil {
		b.Skip("python3 is not installed")
	}
	if why := nodeMissing(); why != "" {
		b.Skip(why)
	}
	bin := buildFlint(b, false)
	round := 0
	for b.Loop() {
		b.StopTimer()
		py, ts := tsBenchRun(b, bin, 20_000, round%2 == 1)
		round++
		b.Logf("python %.0f jobs/s, typescript %.0f jobs/s, typescript/python %.2f", py, ts, ts/py)
		b.ReportMetric(py, "python-jobs/s")
		b.ReportMetric(ts, "typescript-jobs/s")
		b.ReportMetric(ts/py, "ts/py")
		b.StartTimer()
	}
}

// benchProc is a process of a benchmark round, killed when the round ends.
type benchProc struct {
	cmd *exec.Cmd
	out *syncbuf.Buffer
}

func startBenchProc(b *testing.B, cmd *exec.Cmd) *benchProc {
	p := &benchProc{cmd: cmd, out: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return p
}

func (p *benchProc) stop(b *testing.B) {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	if b.Failed() {
		b.Logf("%s output:\n%s", filepath.Base(p.cmd.Path), p.out.String())
	}
}

//flint:long one benchmark round (start the server, each pair of workers in turn, measure) reads best in the order it happens
func tsBenchRun(b *testing.B, bin string, total int, tsFirst bool) (py, ts float64) {
	ctx := context.Background()
	store, dbURL := dbtest.NewStore(b)
	defer store.Close()
	addr := freeAddrB(b)
	base := "http://" + addr
	serve := exec.Command(bin, "serve")
	serve.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "REDIS_URL=", "FLINT_ADDR="+addr, "FLINT_API_KEY="+testAPIKey,
		"FLINT_LOG_FILE=-", "LOG_LEVEL=error", "FLINT_JOB_TYPES=py.noop,ts.noop")
	defer startBenchProc(b, serve).stop(b)
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
	completed := func(typ string) int { return completedCount(b, store, typ) }
	waitUntil("flint serve to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	var key struct {
		Secret string `json:"secret"`
	}
	call(http.MethodPost, "/api/v1/keys", `{"name": "bench", "scopes": ["work"]}`, &key)
	if key.Secret == "" {
		b.Fatal("no work key was made")
	}
	dir := b.TempDir()
	for name, body := range map[string]string{"benchjobs.py": pythonBenchJobs, "benchjobs.mjs": tsBenchJobs} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	settings := strings.Fields(pythonBenchSettings)
	// pair starts two workers of a language, waits until both registered,
	// drains total jobs of typ through them and stops them.
	pair := func(language, typ string, argv func(i int) []string) float64 {
		var procs []*benchProc
		for i := range 2 {
			args := argv(i)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "FLINT_API_KEY="+key.Secret)
			procs = append(procs, startBenchProc(b, cmd))
		}
		defer func() {
			for _, p := range procs {
				p.stop(b)
			}
		}()
		waitUntil("two "+language+" workers to register", func() bool {
			var ws struct {
				Workers []domain.WorkerInfo `json:"workers"`
			}
			api.doB(b, http.MethodGet, "/api/v1/workers", "", &ws)
			return len(slices.DeleteFunc(ws.Workers, func(w domain.WorkerInfo) bool { return w.Language != language })) == 2
		})
		call(http.MethodPost, "/api/v1/queues/bench/pause", "", nil)
		batch := make([]jobs.EnqueueParams, 5000)
		for i := range batch {
			batch[i] = jobs.EnqueueParams{Type: typ, Queue: "bench"}
		}
		for range total / len(batch) {
			if _, err := store.Enqueue(ctx, batch...); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		call(http.MethodPost, "/api/v1/queues/bench/resume", "", nil)
		waitUntil(typ+" jobs to complete", func() bool { return completed(typ) == total })
		return float64(total) / time.Since(start).Seconds()
	}
	runPython := func() {
		py = pair("python", "py.noop", func(i int) []string {
			return append(append([]string{"python3", filepath.Join(root, "clients", "python", "flint_worker.py"), "--url", base,
				"--log-level", "warning", "--name", fmt.Sprintf("bench-py-%d", i)}, settings...), "benchjobs")
		})
	}
	runTS := func() {
		ts = pair("typescript", "ts.noop", func(i int) []string {
			return append(append([]string{"node", filepath.Join(root, "clients", "typescript", "cli.js"), "--url", base,
				"--log-level", "warning", "--name", fmt.Sprintf("bench-ts-%d", i)}, settings...), "benchjobs.mjs")
		})
	}
	if tsFirst {
		runTS()
		runPython()
	} else {
		runPython()
		runTS()
	}
	return py, ts
}
