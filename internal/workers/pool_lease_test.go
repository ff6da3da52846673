package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

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
	_, stop := b.start(t, workers.Config{Workers: 1, HeartbeatInterval: 100 * time.Millisecond, LeaseTTL: time.Minute})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateRunning))
	// Another worker takes over: new token.
	_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET lease_token = gen_random_uuid(), worker_id = 'other' WHERE id = $1`, j.ID)
	require.NoError(t, err)
	select {
	case cause := <-stopped:
		require.ErrorIs(t, cause, domain.ErrLeaseLost)
	case <-time.After(10 * time.Second):
		t.Fatal("handler was not stopped after losing its lease")
	}
	stop() // once the pool has stopped, any write it was going to make is made
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateRunning, got.Status)
	require.Equal(t, "other", *got.WorkerID)
}

// slowFinishes refuses outcome writes until open is closed, as a database
// busy with lock waits or statement timeouts would, while heartbeats and
// claims go through.
type slowFinishes struct {
	*db.Store
	open    chan struct{}
	refused atomic.Int64
}

func (s *slowFinishes) FinishJobs(ctx context.Context, batch []domain.Finish) ([]domain.Moved, []domain.Moved, error) {
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

	// Three lease lifetimes with the outcome stuck, a reaper sweeping all
	// along: the scenario is the passing time, swept every 100 ms.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		_, err := b.store.ReapExpired(b.ctx, nil, 10)
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond) // the reaper's sweep interval in this scenario
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

// leaseWriteWatch counts heartbeats and outcome writes that ran side by
// side against the database; each lingers a moment to widen the window.
type leaseWriteWatch struct {
	*db.Store
	beating, finishing atomic.Int64
	overlaps, beats    atomic.Int64
}

func (s *leaseWriteWatch) ExtendLeases(ctx context.Context, beats []domain.Heartbeat, ttl time.Duration) ([]domain.LeaseStatus, error) {
	s.beating.Add(1)
	defer s.beating.Add(-1)
	s.beats.Add(1)
	if s.finishing.Load() > 0 {
		s.overlaps.Add(1)
	}
	time.Sleep(2 * time.Millisecond) // the scenario: a write that lingers, to widen the window
	return s.Store.ExtendLeases(ctx, beats, ttl)
}

func (s *leaseWriteWatch) FinishJobs(ctx context.Context, batch []domain.Finish) ([]domain.Moved, []domain.Moved, error) {
	s.finishing.Add(1)
	defer s.finishing.Add(-1)
	if s.beating.Load() > 0 {
		s.overlaps.Add(1)
	}
	time.Sleep(2 * time.Millisecond) // the scenario: a write that lingers, to widen the window
	return s.Store.FinishJobs(ctx, batch)
}

// TestPoolLeaseWritesTakeTurns: the heartbeat and the outcome writes of a
// pool never run at once. Each updates many of the pool's rows in an order
// of its own, and side by side they deadlocked in PostgreSQL (one failed
// after deadlock_timeout) during drains. Heartbeats every 5 ms while 1,000
// short jobs finish; a job that runs until the test has counted enough
// heartbeats keeps the pool heartbeating through the whole drain, however
// fast or slowly the machine runs it.
func TestPoolLeaseWritesTakeTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	b.registry.Register("hold", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	hold, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: "hold"}) // claimed first: enqueued first
	require.NoError(t, err)
	ps := make([]jobs.EnqueueParams, 1000)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(`{"ms": 5}`)}
	}
	res, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
	store := &leaseWriteWatch{Store: b.store}
	pool := workers.NewPool(workers.Config{WorkerID: "turns", Workers: 11, PollInterval: 20 * time.Millisecond,
		LeaseTTL: time.Minute, HeartbeatInterval: 5 * time.Millisecond}, store, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, r := range res {
		b.waitFor(t, r.Job.ID, 60*time.Second, status(jobs.StateCompleted))
	}
	require.Eventually(t, func() bool { return store.beats.Load() > 10 }, 30*time.Second, time.Millisecond,
		"the pool heartbeats while the hold job runs")
	close(release)
	b.waitFor(t, hold[0].Job.ID, 30*time.Second, status(jobs.StateCompleted))
	require.Zero(t, store.overlaps.Load(), "a heartbeat and an outcome write ran at once")
}
