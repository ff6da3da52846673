package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/syncbuf"
	"github.com/flinthq/flint/jobs"
)

// Running the flint binary as separate processes, for the tests that
// kill and signal them.

func flintBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the flint binary")
	}
	return buildFlint(t, true)
}

// builds holds the flint binary built once per test run, with the race
// detector (for tests) and with the release flags, as it ships (for
// benchmarks, the upgrade test and TestReleaseBinary: see releaseBuild).
var builds = map[bool]*struct {
	once sync.Once
	path string
	err  error
}{true: {}, false: {}}

func buildFlint(tb testing.TB, race bool) string {
	tb.Helper()
	b := builds[race]
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "flint-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "flint")
		cmd := exec.Command("go", "build", "-race", "-o", b.path, "github.com/flinthq/flint")
		if !race {
			cmd, err = releaseBuild(b.path)
			if err != nil {
				b.err = err
				return
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(tb, b.err)
	return b.path
}

// enqueueNoops enqueues total noop jobs in batches of 5000.
func enqueueNoops(tb testing.TB, store *db.Store, total int) {
	tb.Helper()
	batch := make([]jobs.EnqueueParams, 5000)
	for i := range batch {
		batch[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
	}
	for range total / len(batch) {
		_, err := store.Enqueue(context.Background(), batch...)
		require.NoError(tb, err)
	}
}

type proc struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

// startFlint starts `flint <role>` against the database at dbURL with short
// timings; extra are additional VAR=value settings ("VAR=" unsets VAR, so
// that its default applies).
func startFlint(t *testing.T, role, dbURL string, extra ...string) *proc {
	t.Helper()
	return startBinary(t, flintBinary(t), role, dbURL, extra...)
}

// startBinary is startFlint for another build of Flint (a program of
// one's own over the app package).
func startBinary(t testing.TB, bin, role, dbURL string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, role)
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"REDIS_URL=",
		"FLINT_LOG_FILE=-",
		"LOG_LEVEL=debug",
		"FLINT_API_KEY=test-key-0123456789abcdef",
		"FLINT_LEASE_TTL=2s",
		"FLINT_HEARTBEAT_INTERVAL=400ms",
		"FLINT_REAP_INTERVAL=200ms",
		"FLINT_PROMOTE_INTERVAL=200ms",
		"FLINT_POLL_INTERVAL=200ms",
		"FLINT_WORKERS=4",
		"SMTP_URL=smtp://127.0.0.1:1025",
	)
	for _, e := range extra {
		if name, ok := strings.CutSuffix(e, "="); ok { // "NAME=": unset, the default applies
			cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
			continue
		}
		cmd.Env = append(cmd.Env, e)
	}
	return runProc(t, cmd, filepath.Base(bin)+" "+role)
}

// runProc starts cmd with its output captured, and on cleanup kills it if
// it still runs and, when the test failed, logs that output under label.
func runProc(t testing.TB, cmd *exec.Cmd, label string) *proc {
	t.Helper()
	p := &proc{cmd: cmd, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	require.NoError(t, cmd.Start())
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", label, p.out.String())
		}
	})
	return p
}

// ready waits until the process reports that it has started; its signal
// handling is in place by then, so a SIGTERM is a request to drain, not a
// kill.
func (p *proc) ready(t *testing.T, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "the process to start", func() bool {
		select {
		case <-p.done:
			t.Fatalf("process exited before it started: %v", p.err)
		default:
		}
		return strings.Contains(p.out.String(), `"msg":"flint started"`)
	})
}

func (p *proc) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s", timeout)
		return nil
	}
}

func openStore(t *testing.T, u string) *db.Store {
	t.Helper()
	s, err := db.Open(context.Background(), db.Config{URL: u})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func enqueueAll(t *testing.T, s *db.Store, params ...jobs.EnqueueParams) []*jobs.Job {
	t.Helper()
	res, err := s.Enqueue(context.Background(), params...)
	require.NoError(t, err)
	out := make([]*jobs.Job, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	return out
}

func waitJobs(t *testing.T, s *db.Store, js []*jobs.Job, timeout time.Duration, cond func(*jobs.Job) bool) []*jobs.Job {
	t.Helper()
	out := make([]*jobs.Job, len(js))
	waitUntil(t, timeout, func() (bool, string) {
		ok := true
		var state strings.Builder
		for i, j := range js {
			got, err := s.GetJob(context.Background(), j.ID)
			require.NoError(t, err)
			out[i] = got
			ok = ok && cond(got)
			worker := "none"
			if got.WorkerID != nil {
				worker = *got.WorkerID
			}
			fmt.Fprintf(&state, "\njob %s: %s attempt %d worker %s", got.ID, got.Status, got.Attempt, worker)
		}
		return ok, "the jobs to reach the condition; they are:" + state.String()
	})
	return out
}

func sleepJob(ms int) jobs.EnqueueParams {
	return jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(fmt.Sprintf(`{"ms": %d}`, ms))}
}
