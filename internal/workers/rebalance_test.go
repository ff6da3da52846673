package workers_test

import (
	"context"
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

// lostAnswerStore is the store with hand-backs whose answer is lost: the
// release commits, and the caller hears a timeout, as when its deadline
// strikes between the commit and the reply.
type lostAnswerStore struct {
	*db.Store
	mu       sync.Mutex
	released map[uuid.UUID]bool
}

func (s *lostAnswerStore) ReleaseJobs(ctx context.Context, leases []domain.Lease) ([]domain.Lease, error) {
	done, err := s.Store.ReleaseJobs(ctx, leases)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range done {
		s.released[l.JobID] = true
	}
	return nil, context.DeadlineExceeded
}

func (s *lostAnswerStore) wasReleased(id uuid.UUID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released[id]
}

// TestBufferedJobNotRunAfterAHandBackWhoseAnswerWasLost: the rebalancer
// hands a buffered job back and the release commits, but its answer is
// lost. The job is queued again, so the pool must not run it from its
// buffer on the old lease: it runs once, claimed afresh (before the fix it
// ran twice, once on the lease the release had ended, and a durable
// step's side effect twice with it).
func TestBufferedJobNotRunAfterAHandBackWhoseAnswerWasLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lostAnswerStore{Store: b.store, released: map[uuid.UUID]bool{}}
	r := startBehindLongJob(t, b, store, "lost-answer")
	waitUntil(t, 30*time.Second, "the buffered job's hand-back", func() bool { return store.wasReleased(r.short.ID) })
	r.finish(t, b)
	require.Equal(t, int32(1), r.runsOf(r.short.ID), "the handed-back job ran once")
	j, err := b.store.GetJob(b.ctx, r.short.ID)
	require.NoError(t, err)
	require.Equal(t, 1, j.Attempt, "claimed afresh after the hand-back, as if never claimed before")
}

// behindLongJob is a one-worker pool whose worker runs a long job while
// a short one waits in its buffer, so that the rebalancer hands the
// short one back.
type behindLongJob struct {
	short, long *jobs.Job
	unblock     chan struct{}
	runs        sync.Map // job id → *atomic.Int32
	stop        func() error
}

// startBehindLongJob starts the pool on store (short jobs first, so that
// it learns to claim ahead: see TestPoolClaimsAheadAndHandsBackUnstartedJobs),
// then the long job, then the short one.
func startBehindLongJob(t *testing.T, b *testBundle, store workers.Store, id string) *behindLongJob {
	r := &behindLongJob{unblock: make(chan struct{})}
	b.registry.Register("count", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		n, _ := r.runs.LoadOrStore(j.ID, &atomic.Int32{})
		n.(*atomic.Int32).Add(1)
		if string(j.Payload) == `{"block": true}` {
			select {
			case <-r.unblock:
			case <-ctx.Done():
			}
		}
		return nil, nil
	}))
	var warm []uuid.UUID
	for range 20 {
		warm = append(warm, b.enqueue(t, jobs.TypeNoop, `{}`).ID)
	}
	pool := workers.NewPool(workers.Config{WorkerID: id, Workers: 1, PollInterval: 50 * time.Millisecond}, store, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	errc := make(chan error, 1)
	go func() { errc <- pool.Run(ctx) }()
	var once sync.Once
	var stopErr error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			stopErr = <-errc
		})
		return stopErr
	}
	t.Cleanup(func() { _ = r.stop() })
	for _, id := range warm {
		b.waitFor(t, id, 30*time.Second, status(jobs.StateCompleted))
	}
	r.long = b.enqueue(t, "count", `{"block": true}`)
	pool.Wake("")
	b.waitFor(t, r.long.ID, 30*time.Second, status(jobs.StateRunning))
	r.short = b.enqueue(t, "count", `{}`)
	pool.Wake("")
	return r
}

// finish lets the long job end, waits for both jobs to complete and
// stops the pool.
func (r *behindLongJob) finish(t *testing.T, b *testBundle) {
	close(r.unblock)
	b.waitFor(t, r.short.ID, 30*time.Second, status(jobs.StateCompleted))
	b.waitFor(t, r.long.ID, 30*time.Second, status(jobs.StateCompleted))
	require.NoError(t, r.stop())
}

// runsOf is how many times the handler ran job id.
func (r *behindLongJob) runsOf(id uuid.UUID) int32 {
	n, ok := r.runs.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
	}
}

// lateReleaseStore is the store with hand-backs that arrive late: the
// caller hears a timeout at once, and the release reaches the database
// only after the pool has settled it (KeepLeases), as when the statement
// waited on a loaded server past its caller's deadline.
type lateReleaseStore struct {
	*db.Store
	mu      sync.Mutex
	pending []domain.Lease
	late    []domain.Lease // what the late releases released
	settled chan struct{}
}

func (s *lateReleaseStore) ReleaseJobs(_ context.Context, leases []domain.Lease) ([]domain.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, leases...)
	return nil, context.DeadlineExceeded
}

func (s *lateReleaseStore) KeepLeases(ctx context.Context, leases []domain.Lease) ([]domain.Lease, error) {
	held, err := s.Store.KeepLeases(ctx, leases)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	late, err := s.Store.ReleaseJobs(ctx, s.pending)
	if err != nil {
		return nil, err
	}
	s.late, s.pending = append(s.late, late...), nil
	select {
	case s.settled <- struct{}{}:
	default:
	}
	return held, nil
}

// TestBufferedJobNotRunAfterALateHandBack: the rebalancer hands a
// buffered job back, hears a timeout, and settles the hand-back; the
// release reaches the database only after that. The job stays this
// pool's: the late release releases nothing, and the job runs once, on
// its first claim. When the settle was a read, it said the job was still
// held, the late release queued it under the worker that started it, and
// it ran twice.
func TestBufferedJobNotRunAfterALateHandBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	store := &lateReleaseStore{Store: b.store, settled: make(chan struct{}, 1)}
	r := startBehindLongJob(t, b, store, "late-release")
	select {
	case <-store.settled:
	case <-time.After(30 * time.Second):
		t.Fatal("no hand-back of the buffered job was settled")
	}
	r.finish(t, b)
	store.mu.Lock()
	require.Empty(t, store.late, "the late hand-back released a job the pool had kept")
	store.mu.Unlock()
	require.Equal(t, int32(1), r.runsOf(r.short.ID), "the buffered job ran once")
	j, err := b.store.GetJob(b.ctx, r.short.ID)
	require.NoError(t, err)
	require.Equal(t, 1, j.Attempt, "run on its first claim")
}
