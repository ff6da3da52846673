package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"flint/db"
	"flint/db/dbtest"
	"flint/jobs"
	"flint/workers"
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
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
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
		time.Sleep(10 * time.Millisecond)
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
	require.Equal(t, jobs.OutcomeFailed, ex[0].Outcome)

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
	require.Equal(t, jobs.OutcomeCancelled, ex[len(ex)-1].Outcome)
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

// TestPoolStopsJobWhoseLeaseWasLost: the job is taken away from the worker
// (reaped and re-claimed elsewhere); the next heartbeat notices, cancels the
// handler, and the worker writes nothing.
func TestPoolStopsJobWhoseLeaseWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stopped := make(chan error, 1)
	b.registry.Register("block", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return nil, ctx.Err()
	}))
	j := b.enqueue(t, "block", `{}`)
	b.start(t, workers.Config{Workers: 1, HeartbeatInterval: 100 * time.Millisecond, LeaseTTL: time.Minute})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateRunning))
	// Another worker takes over: new token.
	_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET lease_token = gen_random_uuid(), worker_id = 'other' WHERE id = $1`, j.ID)
	require.NoError(t, err)
	select {
	case cause := <-stopped:
		require.ErrorIs(t, cause, jobs.ErrLeaseLost)
	case <-time.After(10 * time.Second):
		t.Fatal("handler was not stopped after losing its lease")
	}
	time.Sleep(200 * time.Millisecond) // give a wrong write the chance to happen
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateRunning, got.Status)
	require.Equal(t, "other", *got.WorkerID)
}

// TestPoolDrain: on shutdown, jobs that finish within the drain timeout
// complete; the rest are cancelled and handed back uncharged.
func TestPoolDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	short := b.enqueue(t, jobs.TypeSleep, `{"ms": 300}`)
	long := b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`)
	_, stop := b.start(t, workers.Config{Workers: 4, DrainTimeout: 2 * time.Second})
	b.waitFor(t, short.ID, 30*time.Second, status(jobs.StateRunning))
	b.waitFor(t, long.ID, 30*time.Second, status(jobs.StateRunning))
	stop()
	s, err := b.store.GetJob(b.ctx, short.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, s.Status)
	l, err := b.store.GetJob(b.ctx, long.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, l.Status)
	require.Zero(t, l.Attempt, "the interrupted attempt is not charged")
	require.Zero(t, l.Interruptions, "a graceful drain is not a crash")
	ex, err := b.store.ListExecutions(b.ctx, l)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Equal(t, jobs.OutcomeInterrupted, ex[0].Outcome)
}

// TestPoolClaimsAheadAndHandsBackUnstartedJobs: with every worker busy the
// pool holds a claimed job ready (leased, so it shows as running), does not
// count it as running, and on shutdown hands it back uncharged without
// having started it.
func TestPoolClaimsAheadAndHandsBackUnstartedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`)
	pool, stop := b.start(t, workers.Config{Workers: 1, DrainTimeout: time.Second})
	b.waitFor(t, first.ID, 30*time.Second, status(jobs.StateRunning))
	ahead := b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`)
	b.waitFor(t, ahead.ID, 30*time.Second, status(jobs.StateRunning))
	require.Equal(t, 1, pool.Running())
	stop()
	for _, id := range []uuid.UUID{first.ID, ahead.ID} {
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateQueued, j.Status)
		require.Zero(t, j.Attempt, "a handed-back attempt is not charged")
		ex, err := b.store.ListExecutions(b.ctx, j)
		require.NoError(t, err)
		require.Len(t, ex, 1)
		require.Equal(t, jobs.OutcomeInterrupted, ex[0].Outcome)
	}
	j, err := b.store.GetJob(b.ctx, ahead.ID)
	require.NoError(t, err)
	ex, err := b.store.ListExecutions(b.ctx, j)
	require.NoError(t, err)
	require.Contains(t, deref(ex[0].Error), "before the job started")
}

// TestPoolDrainHandsBackJobsWhoseHandlersIgnoreCancellation: a handler that
// never returns does not hold up shutdown forever.
func TestPoolDrainHandsBackJobsWhoseHandlersIgnoreCancellation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	b.registry.Register("stubborn", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		<-release
		return nil, errors.New("too late")
	}))
	j := b.enqueue(t, "stubborn", `{}`)
	_, stop := b.start(t, workers.Config{Workers: 1, DrainTimeout: 200 * time.Millisecond, TimeoutGrace: 200 * time.Millisecond})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateRunning))
	stop()
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, got.Status)
	require.Zero(t, got.Attempt)
}

// slowFinishes refuses outcome writes until open is closed, as a database
// busy with lock waits or statement timeouts would, while heartbeats and
// claims go through.
type slowFinishes struct {
	*db.Store
	open    chan struct{}
	refused atomic.Int64
}

func (s *slowFinishes) FinishJobs(ctx context.Context, batch []jobs.Finish) ([]jobs.Moved, []jobs.Moved, error) {
	select {
	case <-s.open:
		return s.Store.FinishJobs(ctx, batch)
	default:
		s.refused.Add(1)
		return nil, nil, errors.New("canceling statement due to statement timeout")
	}
}

// TestPoolKeepsLeaseWhileOutcomeWaits: a job that has finished but whose
// outcome cannot be written yet keeps its lease renewed, so the reaper does
// not hand it out again and it runs once.
func TestPoolKeepsLeaseWhileOutcomeWaits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var runs atomic.Int64
	b.registry.Register("count", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		runs.Add(1)
		return nil, nil
	}))
	j := b.enqueue(t, "count", `{}`)
	store := &slowFinishes{Store: b.store, open: make(chan struct{})}
	pool := workers.NewPool(workers.Config{WorkerID: "slow-finish", Workers: 2, PollInterval: 50 * time.Millisecond,
		LeaseTTL: time.Second, HeartbeatInterval: 200 * time.Millisecond}, store, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Three lease lifetimes with the outcome stuck, a reaper sweeping all along.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		_, err := b.store.ReapExpired(b.ctx, nil, 10)
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
	}
	require.Positive(t, store.refused.Load(), "the outcome write was attempted and refused")
	require.Equal(t, 0, pool.Running(), "a finished job does not count as running")
	close(store.open)
	got := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
	require.Equal(t, int64(1), runs.Load(), "the job ran once")
	require.Zero(t, got.Interruptions)
	ex, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.Len(t, ex, 1)
}

// TestPoolDrainRaceWithReturningHandlers: handlers that ignore cancellation
// and return right around the moment the drain gives up on them. Each job
// gets exactly one outcome, and the pool does not send on its closed
// outcome channel (which would panic).
func TestPoolDrainRaceWithReturningHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const grace = 100 * time.Millisecond
	b.registry.Register("late", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		<-ctx.Done()
		// Return within a millisecond either side of the give-up.
		time.Sleep(grace + time.Duration(int(j.ID[0])%41-20)*50*time.Microsecond)
		return nil, errors.New("returned late")
	}))
	for round := range 5 {
		var ids []uuid.UUID
		for range 64 {
			ids = append(ids, b.enqueue(t, "late", `{}`, func(p *jobs.EnqueueParams) { p.Queue = fmt.Sprintf("r%d", round) }).ID)
		}
		_, stop := b.start(t, workers.Config{Workers: 64, Queues: []string{fmt.Sprintf("r%d", round)},
			DrainTimeout: 50 * time.Millisecond, TimeoutGrace: grace})
		for _, id := range ids {
			b.waitFor(t, id, 30*time.Second, status(jobs.StateRunning))
		}
		stop()
		time.Sleep(3 * grace) // let stragglers return after Run has
		for _, id := range ids {
			got, err := b.store.GetJob(b.ctx, id)
			require.NoError(t, err)
			require.Contains(t, []jobs.State{jobs.StateQueued, jobs.StateScheduled}, got.Status, "handed back or retried")
			ex, err := b.store.ListExecutions(b.ctx, got)
			require.NoError(t, err)
			require.Len(t, ex, 1, "one outcome per run")
		}
	}
}

// claimThenStall claims for real, then holds the answer until the caller's
// context ends or a moment passes, as a claim in flight at shutdown does;
// a cancelled context loses the committed claim, as the driver would.
type claimThenStall struct {
	*db.Store
	claimed chan struct{}
}

func (s *claimThenStall) ClaimJobs(ctx context.Context, p jobs.ClaimParams) ([]*jobs.Job, error) {
	got, err := s.Store.ClaimJobs(ctx, p)
	if err != nil || len(got) == 0 {
		return got, err
	}
	close(s.claimed)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(300 * time.Millisecond):
		return got, nil
	}
}

// TestPoolShutdownDoesNotStrandAClaim: jobs claimed while the pool is told
// to stop are still run or handed back, not left leased to a process that
// is gone.
func TestPoolShutdownDoesNotStrandAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.TypeNoop, `{}`)
	store := &claimThenStall{Store: b.store, claimed: make(chan struct{})}
	pool := workers.NewPool(workers.Config{WorkerID: "stall", Workers: 1, PollInterval: 50 * time.Millisecond}, store, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	<-store.claimed
	cancel()
	require.NoError(t, <-done)
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Contains(t, []jobs.State{jobs.StateCompleted, jobs.StateQueued}, got.Status, "run or handed back, not stranded")
}

// leaseWriteWatch counts heartbeats and outcome writes that ran side by
// side against the database; each lingers a moment to widen the window.
type leaseWriteWatch struct {
	*db.Store
	beating, finishing atomic.Int64
	overlaps, beats    atomic.Int64
}

func (s *leaseWriteWatch) ExtendLeases(ctx context.Context, beats []jobs.Heartbeat, ttl time.Duration) ([]jobs.LeaseStatus, error) {
	s.beating.Add(1)
	defer s.beating.Add(-1)
	s.beats.Add(1)
	if s.finishing.Load() > 0 {
		s.overlaps.Add(1)
	}
	time.Sleep(2 * time.Millisecond)
	return s.Store.ExtendLeases(ctx, beats, ttl)
}

func (s *leaseWriteWatch) FinishJobs(ctx context.Context, batch []jobs.Finish) ([]jobs.Moved, []jobs.Moved, error) {
	s.finishing.Add(1)
	defer s.finishing.Add(-1)
	if s.beating.Load() > 0 {
		s.overlaps.Add(1)
	}
	time.Sleep(2 * time.Millisecond)
	return s.Store.FinishJobs(ctx, batch)
}

// TestPoolLeaseWritesTakeTurns: the heartbeat and the outcome writes of a
// pool never run at once. Each updates many of the pool's rows in an order
// of its own, and side by side they deadlocked in PostgreSQL (one failed
// after deadlock_timeout) during drains. Heartbeats every 5 ms while 600
// short jobs finish.
func TestPoolLeaseWritesTakeTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps := make([]jobs.EnqueueParams, 600)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(`{"ms": 5}`)}
	}
	res, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
	store := &leaseWriteWatch{Store: b.store}
	pool := workers.NewPool(workers.Config{WorkerID: "turns", Workers: 20, PollInterval: 20 * time.Millisecond,
		LeaseTTL: time.Minute, HeartbeatInterval: 5 * time.Millisecond}, store, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	defer func() { cancel(); <-done }()
	b.waitFor(t, res[len(res)-1].Job.ID, 60*time.Second, status(jobs.StateCompleted))
	for _, r := range res {
		b.waitFor(t, r.Job.ID, 30*time.Second, status(jobs.StateCompleted))
	}
	require.Greater(t, store.beats.Load(), int64(10), "heartbeats ran during the drain")
	require.Zero(t, store.overlaps.Load(), "a heartbeat and an outcome write ran at once")
}
