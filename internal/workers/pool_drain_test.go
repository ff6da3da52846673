package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestPoolDrain: on shutdown, jobs that finish within the drain timeout
// complete; the rest are cancelled and handed back uncharged. Shutdown
// begins once both handlers have started: one still waiting for a worker
// (claimed) is handed back unstarted
// (TestPoolClaimsAheadAndHandsBackUnstartedJobs).
func TestPoolDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	started := make(chan uuid.UUID, 2)
	b.registry.Register("nap", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		var p struct{ MS int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, err
		}
		started <- j.ID
		select {
		case <-time.After(time.Duration(p.MS) * time.Millisecond):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	short := b.enqueue(t, "nap", `{"ms": 300}`)
	long := b.enqueue(t, "nap", `{"ms": 600000}`)
	_, stop := b.start(t, workers.Config{Workers: 4, DrainTimeout: 2 * time.Second})
	for range 2 {
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the handlers did not start")
		}
	}
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
	require.Equal(t, domain.OutcomeInterrupted, ex[0].Outcome)
}

// startWithOneBuffered starts a pool of one worker that runs a long job
// (first) and holds another, of queue, claimed ahead in its buffer.
func startWithOneBuffered(t *testing.T, b *testBundle, queue string) (pool *workers.Pool, stop func(), first, ahead *jobs.Job) {
	t.Helper()
	// Short jobs first: the pool learns that its handlers finish well
	// within a claim's round trip, which is when claiming ahead pays.
	var warm []uuid.UUID
	for range 20 {
		warm = append(warm, b.enqueue(t, jobs.TypeNoop, `{}`).ID)
	}
	// The rebalancer hands a buffered job back once no worker has been
	// free for half a poll interval (TestBufferDoesNotHoldJobsFromIdleProcesses);
	// the job must stay buffered here, so the interval is long and each
	// enqueue wakes the pool, as LISTEN does in a process.
	pool, stop = b.start(t, workers.Config{Workers: 1, DrainTimeout: time.Second, PollInterval: time.Minute})
	for _, id := range warm {
		b.waitFor(t, id, 30*time.Second, status(jobs.StateCompleted))
	}
	first = b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`)
	pool.Wake("")
	b.waitFor(t, first.ID, 30*time.Second, status(jobs.StateRunning))
	ahead = b.enqueue(t, jobs.TypeSleep, `{"ms": 600000}`, func(p *jobs.EnqueueParams) { p.Queue = queue })
	pool.Wake(queue)
	b.waitFor(t, ahead.ID, 30*time.Second, status(jobs.StateClaimed))
	return pool, stop, first, ahead
}

// TestPoolClaimsAheadAndHandsBackUnstartedJobs: with every worker busy the
// pool holds a claimed job ready (leased, shown and counted as claimed, not
// running, with no start), and on shutdown hands it back uncharged
// without having started it.
func TestPoolClaimsAheadAndHandsBackUnstartedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, stop, first, ahead := startWithOneBuffered(t, b, "")
	require.Equal(t, 1, pool.Running())
	a, err := b.store.GetJob(b.ctx, ahead.ID)
	require.NoError(t, err)
	require.Nil(t, a.StartedAt, "a claimed job has not started")
	st, err := b.store.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.ByStatus["running"])
	require.Equal(t, int64(1), st.ByStatus["claimed"])
	stop()
	for _, id := range []uuid.UUID{first.ID, ahead.ID} {
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateQueued, j.Status)
		require.Zero(t, j.Attempt, "a handed-back attempt is not charged")
		ex, err := b.store.ListExecutions(b.ctx, j)
		require.NoError(t, err)
		require.Len(t, ex, 1)
		require.Equal(t, domain.OutcomeInterrupted, ex[0].Outcome)
	}
	j, err := b.store.GetJob(b.ctx, ahead.ID)
	require.NoError(t, err)
	ex, err := b.store.ListExecutions(b.ctx, j)
	require.NoError(t, err)
	require.Contains(t, deref(ex[0].Error), "before the job started")
}

// TestPoolClaimsLongJobsOnlyForIdleWorkers: with jobs that run far longer
// than a claim takes, the pool claims none ahead: a job is claimed only
// when a worker is free to start it, so the jobs a worker holds are the
// jobs it runs (its busy count does not pass its workers) and a job's
// recorded run (claim to finish) is its handler's time, not that plus a
// wait for a free worker.
func TestPoolClaimsLongJobsOnlyForIdleWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// The pool claims ahead what its workers finish during one claim, so
	// a claim would have to take half a run (1.5 s) before it claimed one
	// job ahead; with runs of one second, claims on a machine loaded by
	// the rest of the suite (load 14 on 2 cores) took long enough to.
	const workersN, jobsN = 2, 4
	const run = 3 * time.Second
	var began sync.Map // job id → when its handler started
	b.registry.Register("slow", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		began.Store(j.ID, time.Now())
		select {
		case <-time.After(run):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	var ids []uuid.UUID
	for range jobsN {
		ids = append(ids, b.enqueue(t, "slow", `{}`).ID)
	}
	_, _ = b.start(t, workers.Config{WorkerID: "long-jobs", Workers: workersN})
	for _, id := range ids {
		b.waitFor(t, id, time.Minute, status(jobs.StateCompleted))
	}
	for _, id := range ids {
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		at, ok := began.Load(id)
		require.True(t, ok)
		// A job claimed ahead waits for a worker to finish a run, the
		// better part of three seconds; a claim and a start on a machine
		// busy with other tests have taken 110 ms.
		waited := at.(time.Time).Sub(*j.StartedAt)
		require.Less(t, waited, run/2,
			"job %s was claimed %s before a worker started it", id, waited)
	}
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

// TestPoolDrainRaceWithReturningHandlers: handlers that ignore cancellation
// and return right around the moment the drain gives up on them. Each job
// gets exactly one outcome, and the pool does not send on its closed
// outcome channel (which would panic).
func TestPoolDrainRaceWithReturningHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const grace = 100 * time.Millisecond
	var inHandler atomic.Int64
	b.registry.Register("late", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		inHandler.Add(1)
		defer inHandler.Add(-1)
		<-ctx.Done()
		// The scenario: return within a millisecond either side of the give-up.
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
		require.Eventually(t, func() bool { return inHandler.Load() == 0 }, 10*time.Second, time.Millisecond,
			"the stragglers return after Run has")
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

func (s *claimThenStall) ClaimJobs(ctx context.Context, p domain.ClaimParams) ([]*jobs.Job, error) {
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

// TestPausedQueueJobClaimedAheadDoesNotStart: a job the pool claimed
// ahead of a free worker, just before its queue was paused, goes back to
// the queue unstarted when a worker takes it, and no execution is
// recorded; a pause means no job of the queue starts from then on.
func TestPausedQueueJobClaimedAheadDoesNotStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pool, stop, first, ahead := startWithOneBuffered(t, b, "p")
	defer stop()

	_, err := b.store.UpdateQueue(b.ctx, "p", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	require.NoError(t, err)
	_, err = b.store.CancelJob(b.ctx, first.ID) // the worker frees up and takes the buffered job
	require.NoError(t, err)
	pool.CancelRequested(first.ID.String())
	j := b.waitFor(t, ahead.ID, 30*time.Second, status(jobs.StateQueued))
	require.Nil(t, j.StartedAt, "it never started")
	require.Zero(t, j.Attempt, "a handed-back claim is not charged")
	ex, err := b.store.ListExecutions(b.ctx, j)
	require.NoError(t, err)
	require.Empty(t, ex, "no run is recorded")
	require.Zero(t, pool.Running())
}
