package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/jobs"
)

// groupStore opens a second store on b's database whose group commits
// wait window for their jobs, so that a test's goroutines surely share one.
func (b *testBundle) groupStore(t *testing.T, window time.Duration) *db.Store {
	t.Helper()
	s, err := db.Open(b.ctx, db.Config{URL: b.url, MaxConns: 8, EnqueueWindow: window, EnqueueBatch: 1000})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// keepWriting keeps one of s's flushers writing until the test ends (a
// batch whose job waits for an idempotency key an open transaction holds),
// so that new batches wait for their window: with nothing being written,
// a batch goes at once.
func (b *testBundle) keepWriting(t *testing.T, s *db.Store) {
	t.Helper()
	tx, err := b.store.Pool().Begin(b.ctx)
	require.NoError(t, err)
	hold := jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "hold", IdempotencyKey: "hold"}
	_, err = db.EnqueueTx(b.ctx, tx, hold)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.Enqueue(context.Background(), hold)
	}()
	t.Cleanup(func() {
		_ = tx.Rollback(context.Background())
		<-done
	})
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "the held batch waits for the key")
}

// enqueueAll enqueues each params entry from a goroutine of its own, at
// once, and returns each one's answer.
func enqueueAll(ctx context.Context, s *db.Store, params []jobs.EnqueueParams) ([]jobs.Enqueued, []error) {
	out := make([]jobs.Enqueued, len(params))
	errs := make([]error, len(params))
	var wg sync.WaitGroup
	for i := range params {
		wg.Go(func() {
			res, err := s.Enqueue(ctx, params[i])
			errs[i] = err
			if err == nil {
				out[i] = res[0]
			}
		})
	}
	wg.Wait()
	return out, errs
}

// TestGroupCommitManyGoroutines: concurrent single enqueues share
// commits, and each caller gets its own job, stored as returned.
func TestGroupCommitManyGoroutines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 300
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: []string{"a", "b", "c"}[i%3], Priority: 1 + i%3,
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		if i%10 == 0 {
			params[i].Delay = time.Hour
		}
	}
	out, errs := enqueueAll(b.ctx, b.store, params)
	seen := map[uuid.UUID]bool{}
	for i := range params {
		require.NoError(t, errs[i], "job %d", i)
		require.True(t, out[i].Inserted, "job %d", i)
		require.False(t, seen[out[i].Job.ID], "job %d has an id of its own", i)
		seen[out[i].Job.ID] = true
		got, err := b.store.GetJob(b.ctx, out[i].Job.ID)
		require.NoError(t, err, "job %d is durable once answered", i)
		require.JSONEq(t, string(params[i].Payload), string(got.Payload), "job %d", i)
		require.Equal(t, params[i].Queue, got.Queue, "job %d", i)
		require.Equal(t, got.Status, out[i].Job.Status, "job %d", i)
		if i%10 == 0 {
			require.Equal(t, jobs.StateScheduled, got.Status, "job %d", i)
		} else {
			require.Equal(t, jobs.StateQueued, got.Status, "job %d", i)
		}
	}
	batches, written := b.store.GroupCommits()
	require.Equal(t, uint64(n), written)
	require.Less(t, batches, uint64(n), "some jobs shared a commit")
}

// TestGroupCommitIsolatesABadJob: a job that violates a constraint (here
// an id that exists already) fails alone; the jobs that shared its batch
// are written and answered as usual.
func TestGroupCommitIsolatesABadJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	taken := b.enqueue(t, jobs.EnqueueParams{})
	s := b.groupStore(t, 300*time.Millisecond)
	params := make([]jobs.EnqueueParams, 40)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, IdempotencyKey: fmt.Sprintf("k%d", i%20)}
	}
	const bad = 17
	params[bad] = jobs.EnqueueParams{Type: jobs.TypeNoop, ID: taken.ID}
	out, errs := enqueueAll(b.ctx, s, params)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, errs[bad], &pgErr)
	require.Equal(t, "23505", pgErr.Code, "a duplicate id")
	for i := range params {
		if i == bad {
			continue
		}
		require.NoError(t, errs[i], "job %d", i)
		_, err := b.store.GetJob(b.ctx, out[i].Job.ID)
		require.NoError(t, err, "job %d", i)
	}
	_, written := s.GroupCommits()
	require.Equal(t, uint64(len(params)-1), written)

	// The store goes on sharing commits after the bad job: forty good
	// jobs at once take fewer than forty commits. (The batch that held
	// the bad job was written row by row, so it proves nothing either way.)
	before, _ := s.GroupCommits()
	good := make([]jobs.EnqueueParams, 40)
	for i := range good {
		good[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
	}
	_, errs = enqueueAll(b.ctx, s, good)
	for i, err := range errs {
		require.NoError(t, err, "job %d", i)
	}
	after, _ := s.GroupCommits()
	require.Less(t, after-before, uint64(len(good)))
}

// TestGroupCommitSameKeyInOneBatch: requests with one idempotency key that
// share a batch behave as if one after the other: the first is inserted,
// every other gets that job.
func TestGroupCommitSameKeyInOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.groupStore(t, 300*time.Millisecond)
	params := make([]jobs.EnqueueParams, 30)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, IdempotencyKey: "order-7"}
		if i%3 == 0 {
			params[i].IdempotencyKey = fmt.Sprintf("other-%d", i)
		}
	}
	out, errs := enqueueAll(b.ctx, s, params)
	var holder uuid.UUID
	inserted := 0
	for i := range params {
		require.NoError(t, errs[i], "job %d", i)
		if i%3 == 0 {
			require.True(t, out[i].Inserted, "job %d has a key of its own", i)
			continue
		}
		if out[i].Inserted {
			inserted++
		}
		if holder == uuid.Nil {
			holder = out[i].Job.ID
		}
		require.Equal(t, holder, out[i].Job.ID, "job %d gets the key's job", i)
	}
	require.Equal(t, 1, inserted, "one request inserted the key's job")
	batches, _ := s.GroupCommits()
	require.Less(t, batches, uint64(len(params)), "the requests shared batches")
}

// TestGroupCommitCancelWhileWaiting: a caller that gives up while its
// job waits for its batch (gathering while another is written) gets its
// context's error at once, and the job is not written; its neighbours in
// the batch are.
func TestGroupCommitCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A window long enough that "at once" and "at the batch's end" stay
	// apart however slow the machine (the check below is half of it).
	const window = 6 * time.Second
	s := b.groupStore(t, window)
	b.keepWriting(t, s)
	neighbour := make(chan []jobs.Enqueued, 1)
	go func() {
		res, err := s.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "kept"})
		if err != nil {
			t.Error(err)
		}
		neighbour <- res
	}()
	ctx, cancel := context.WithTimeout(b.ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "gone"})
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	require.Less(t, time.Since(start), window/2, "answered at once, not at the batch's end")
	kept := <-neighbour
	require.Len(t, kept, 1)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE queue = 'gone'`).Scan(&n))
	require.Zero(t, n, "the abandoned job was not written")
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE queue = 'kept'`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestGroupCommitIdleGoesAtOnce: with no batch being written, a single
// enqueue does not wait for the window (nobody is about to join it).
func TestGroupCommitIdleGoesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.groupStore(t, 5*time.Second)
	for range 3 {
		start := time.Now()
		_, err := s.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
		require.NoError(t, err)
		require.Less(t, time.Since(start), 4*time.Second, "written without waiting for the 5 s window")
	}
	batches, n := s.GroupCommits()
	require.Equal(t, uint64(3), batches)
	require.Equal(t, uint64(3), n)
}
