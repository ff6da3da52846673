package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

type testBundle struct {
	store    *db.Store
	registry *jobs.Registry
	ctx      context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	return &testBundle{store: store, registry: reg, ctx: ctx}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs a pool until the returned stop function is called; stop waits
// for the drain to finish.
func (b *testBundle) start(t *testing.T, cfg workers.Config) (*workers.Pool, func()) {
	t.Helper()
	if cfg.WorkerID == "" {
		cfg.WorkerID = "test-" + uuid.NewString()[:8]
	}
	cfg.PollInterval = max(cfg.PollInterval, 0)
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	pool := workers.NewPool(cfg, b.store, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	errc := make(chan error, 1)
	go func() { errc <- pool.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("pool did not stop")
		}
	}
	t.Cleanup(stop)
	return pool, stop
}

func (b *testBundle) enqueue(t *testing.T, typ string, payload string, mod ...func(*jobs.EnqueueParams)) *jobs.Job {
	t.Helper()
	p := jobs.EnqueueParams{Type: typ, Payload: json.RawMessage(payload)}
	for _, m := range mod {
		m(&p)
	}
	require.NoError(t, p.Validate(b.registry, time.Now()))
	res, err := b.store.Enqueue(b.ctx, p)
	require.NoError(t, err)
	return res[0].Job
}

// waitFor polls the job until cond holds or the timeout passes.
func (b *testBundle) waitFor(t *testing.T, id uuid.UUID, timeout time.Duration, cond func(*jobs.Job) bool) *jobs.Job {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: condition not met within %s (status %s, attempt %d, error %v)", id, timeout, j.Status, j.Attempt, deref(j.LastError))
		}
		time.Sleep(10 * time.Millisecond) // the poll interval
	}
}

func status(s jobs.State) func(*jobs.Job) bool {
	return func(j *jobs.Job) bool { return j.Status == s }
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestPoolRunsEveryJobOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int64
	seen := make(chan uuid.UUID, 1000)
	b.registry.Register("count", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		runs.Add(1)
		seen <- j.ID
		return map[string]int{"n": 1}, nil
	}))
	const n = 300
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "count", Priority: 1 + i%3}
	}
	res, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)
	b.start(t, workers.Config{Workers: 8, FetchLimit: 5})
	for _, r := range res {
		b.waitFor(t, r.Job.ID, 30*time.Second, status(jobs.StateCompleted))
	}
	require.Equal(t, int64(n), runs.Load())
	ids := map[uuid.UUID]bool{}
	for range n {
		ids[<-seen] = true
	}
	require.Len(t, ids, n)
	j, err := b.store.GetJob(b.ctx, res[0].Job.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(j.Result))
}

func TestPoolPanicBecomesFailureWithStack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("explode", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) {
		var m map[string]int
		m["boom"]++ //nolint:staticcheck // a nil map write: the real runtime panic this test needs
		return nil, nil
	}))
	zero := 0
	j := b.enqueue(t, "explode", `{}`, func(p *jobs.EnqueueParams) { p.MaxRetries = &zero })
	b.start(t, workers.Config{Workers: 2})
	got := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Contains(t, *got.LastError, "panic: assignment to entry in nil map")
	require.Contains(t, *got.LastError, "pool_test.go", "the stack trace points at the handler")
}

// TestPoolPermanentFailureGoesToTheDLQ: a handler that says no retry can
// fix its failure (Permanent) sends the job to the dead-letter queue on the
// first attempt, with its reason, retries left or not; the SSRF guard's
// refusal of an http_request is such a failure. Cancel still cancels.
func TestPoolPermanentFailureGoesToTheDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("doomed", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) {
		return nil, jobs.Permanent(errors.New("the account was closed"))
	}))
	b.registry.Register("unwanted", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) {
		return nil, jobs.Cancel(errors.New("superseded by a newer report"))
	}))
	doomed := b.enqueue(t, "doomed", `{}`)
	ssrf := b.enqueue(t, jobs.TypeHTTPRequest, `{"url": "http://127.0.0.1:9/admin"}`)
	unwanted := b.enqueue(t, "unwanted", `{}`)
	b.start(t, workers.Config{Workers: 2})
	got := b.waitFor(t, doomed.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Equal(t, 1, got.Attempt, "no retry was spent on it")
	require.Equal(t, 3, got.MaxRetries, "though three were left")
	require.NotNil(t, got.FinishedAt)
	require.Equal(t, "permanent failure: the account was closed", *got.LastError)
	ex, err := b.store.ListExecutions(context.Background(), got)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Equal(t, domain.OutcomeFailed, ex[0].Outcome)

	got = b.waitFor(t, ssrf.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Equal(t, 1, got.Attempt)
	require.Contains(t, *got.LastError, "refused")

	got = b.waitFor(t, unwanted.ID, 30*time.Second, status(jobs.StateCancelled))
	require.Contains(t, *got.LastError, "superseded")
}

func TestPoolRetriesFailingJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.TypeFail, `{"message":"flaky","times":1}`)
	b.start(t, workers.Config{Workers: 2})
	got := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateScheduled))
	require.Equal(t, "flaky", *got.LastError)
	require.Equal(t, 1, got.Attempt)
	// Backoff for a first failure is 0.5 s to 1.5 s after the failure.
	delay := got.RunAt.Sub(got.UpdatedAt)
	require.GreaterOrEqual(t, delay, 500*time.Millisecond)
	require.Less(t, delay, 1500*time.Millisecond)
	// On a clock held just before run_at the promoter leaves it; at run_at
	// it promotes it.
	before := got.RunAt.Add(-time.Millisecond)
	moved, err := b.store.PromoteDue(b.ctx, &before, 10)
	require.NoError(t, err)
	require.Empty(t, moved)
	at := got.RunAt
	moved, err = b.store.PromoteDue(b.ctx, &at, 10)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	// The second attempt succeeds ("times": 1).
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
}

func TestPoolTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0
	j := b.enqueue(t, jobs.TypeSleep, `{"ms": 60000}`, func(p *jobs.EnqueueParams) {
		p.TimeoutSeconds = 1
		p.MaxRetries = &zero
	})
	b.start(t, workers.Config{Workers: 2})
	got := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Contains(t, *got.LastError, "timed out after 1s")
}

// TestPoolCancelRunningWithinAHeartbeat: an operator cancels a running
// sleep job; the heartbeat learns of it and the handler's context is
// cancelled, so the job ends cancelled long before the sleep would.
func TestPoolCancelRunningWithinAHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`)
	const beat = 200 * time.Millisecond
	b.start(t, workers.Config{Workers: 2, HeartbeatInterval: beat, LeaseTTL: 10 * beat})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateRunning))
	_, err := b.store.CancelJob(b.ctx, j.ID)
	require.NoError(t, err)
	got := b.waitFor(t, j.ID, 10*beat, status(jobs.StateCancelled))
	require.Contains(t, *got.LastError, "cancel")
	ex, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.Equal(t, domain.OutcomeCancelled, ex[len(ex)-1].Outcome)
}

// TestPoolCancelViaNotification: with the pool told of the request (as the
// listener does), cancellation does not wait for the heartbeat tick.
func TestPoolCancelViaNotification(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`)
	pool, _ := b.start(t, workers.Config{Workers: 2, HeartbeatInterval: time.Hour, LeaseTTL: 3 * time.Hour})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateRunning))
	_, err := b.store.CancelJob(b.ctx, j.ID)
	require.NoError(t, err)
	pool.CancelRequested(j.ID.String())
	b.waitFor(t, j.ID, 10*time.Second, status(jobs.StateCancelled))
}
