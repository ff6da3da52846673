package db_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

type testBundle struct {
	store *db.Store
	url   string
	ctx   context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	store, u := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &testBundle{store: store, url: u, ctx: ctx}
}

func (b *testBundle) enqueue(t *testing.T, p jobs.EnqueueParams) *jobs.Job {
	t.Helper()
	if p.Type == "" {
		p.Type = jobs.TypeNoop
	}
	res, err := b.store.Enqueue(b.ctx, p)
	require.NoError(t, err)
	require.Len(t, res, 1)
	return res[0].Job
}

func (b *testBundle) claim(t *testing.T, worker string, limit int, ttl time.Duration) []*jobs.Job {
	t.Helper()
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: worker, Limit: limit, LeaseTTL: ttl})
	require.NoError(t, err)
	return got
}

func TestEnqueueClaimComplete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Payload: json.RawMessage(`{"a":1}`)})
	require.Equal(t, jobs.StateQueued, j.Status)
	require.Equal(t, jobs.DefaultPriority, j.Priority)
	require.Equal(t, 2.0, j.EffectivePriority)
	require.Equal(t, domain.DefaultMaxRetries, j.MaxRetries)

	claimed := b.claim(t, "w1", 10, time.Minute)
	require.Len(t, claimed, 1)
	c := claimed[0]
	require.Equal(t, j.ID, c.ID)
	require.Equal(t, jobs.StateRunning, c.Status)
	require.Equal(t, 1, c.Attempt)
	require.Equal(t, 1, c.Executions)
	require.NotNil(t, c.LeaseToken)
	require.Equal(t, "w1", *c.WorkerID)

	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c), Outcome: domain.OutcomeSucceeded, Result: []byte(`{"ok":true}`)}})
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, moved[0].Status)

	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, got.Status)
	require.JSONEq(t, `{"ok":true}`, string(got.Result))
	require.NotNil(t, got.FinishedAt)
	require.Nil(t, got.LeaseToken)
	ex, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Equal(t, domain.OutcomeSucceeded, ex[0].Outcome)
	require.Equal(t, 1, ex[0].Attempt)
	require.Equal(t, "w1", ex[0].WorkerID)
}

func TestClaimOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	low := b.enqueue(t, jobs.EnqueueParams{Priority: jobs.PriorityLow})
	med := b.enqueue(t, jobs.EnqueueParams{Priority: jobs.PriorityMedium})
	high1 := b.enqueue(t, jobs.EnqueueParams{Priority: jobs.PriorityHigh})
	high2 := b.enqueue(t, jobs.EnqueueParams{Priority: jobs.PriorityHigh})
	later := time.Now().Add(time.Hour)
	b.enqueue(t, jobs.EnqueueParams{Priority: jobs.PriorityHigh, RunAt: &later}) // scheduled: not claimable

	got := b.claim(t, "w", 2, time.Minute)
	require.Equal(t, []uuid.UUID{high1.ID, high2.ID}, ids(got))
	got = b.claim(t, "w", 10, time.Minute)
	require.Equal(t, []uuid.UUID{med.ID, low.ID}, ids(got))
	require.Empty(t, b.claim(t, "w", 10, time.Minute))
}

func TestClaimQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.enqueue(t, jobs.EnqueueParams{Queue: "a"})
	b.enqueue(t, jobs.EnqueueParams{Queue: "b"})
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"a", "c"}, Limit: 10, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{a.ID}, ids(got))

	// Across several queues the claim order is still global.
	lowA := b.enqueue(t, jobs.EnqueueParams{Queue: "a", Priority: jobs.PriorityLow})
	highC := b.enqueue(t, jobs.EnqueueParams{Queue: "c", Priority: jobs.PriorityHigh})
	medA := b.enqueue(t, jobs.EnqueueParams{Queue: "a", Priority: jobs.PriorityMedium})
	got, err = b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"a", "c"}, Limit: 2, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{highC.ID, medA.ID}, ids(got))
	got, err = b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"a", "c"}, Limit: 2, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{lowA.ID}, ids(got), "rows locked but not kept by the first claim are free again")
}

func TestEnqueueScheduledAndDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	past := time.Now().Add(-time.Hour)
	require.Equal(t, jobs.StateQueued, b.enqueue(t, jobs.EnqueueParams{RunAt: &past}).Status)
	d := b.enqueue(t, jobs.EnqueueParams{Delay: time.Hour})
	require.Equal(t, jobs.StateScheduled, d.Status)
	require.WithinDuration(t, time.Now().Add(time.Hour), d.RunAt, time.Minute)

	// The promoter moves it once due, judged by the clock it is given.
	future := time.Now().Add(2 * time.Hour)
	moved, err := b.store.PromoteDue(b.ctx, nil, 100)
	require.NoError(t, err)
	require.Empty(t, moved)
	moved, err = b.store.PromoteDue(b.ctx, &future, 100)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	require.Equal(t, d.ID, moved[0].JobID)
	require.Equal(t, jobs.StateQueued, moved[0].Status)
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: "noop", IdempotencyKey: "order-42"})
	require.NoError(t, err)
	require.True(t, first[0].Inserted)
	again, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: "noop", IdempotencyKey: "order-42", Priority: 1})
	require.NoError(t, err)
	require.False(t, again[0].Inserted)
	require.Equal(t, first[0].Job.ID, again[0].Job.ID)
	require.Equal(t, jobs.DefaultPriority, again[0].Job.Priority, "the existing job is returned unchanged")

	// Within one batch too, and concurrently.
	batch, err := b.store.Enqueue(b.ctx,
		jobs.EnqueueParams{Type: "noop", IdempotencyKey: "k2"},
		jobs.EnqueueParams{Type: "noop", IdempotencyKey: "k2"},
		jobs.EnqueueParams{Type: "noop"})
	require.NoError(t, err)
	require.True(t, batch[0].Inserted)
	require.False(t, batch[1].Inserted)
	require.Equal(t, batch[0].Job.ID, batch[1].Job.ID)
	require.True(t, batch[2].Inserted)

	const n = 20
	results := make(chan uuid.UUID, n)
	for range n {
		go func() {
			r, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: "noop", IdempotencyKey: "race"})
			if err != nil {
				results <- uuid.Nil
				return
			}
			results <- r[0].Job.ID
		}()
	}
	seen := map[uuid.UUID]bool{}
	for range n {
		seen[<-results] = true
	}
	require.Len(t, seen, 1)
	require.False(t, seen[uuid.Nil])
}

func TestEnqueueTxRollback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tx, err := b.store.Pool().Begin(b.ctx)
	require.NoError(t, err)
	res, err := db.EnqueueTx(b.ctx, tx, jobs.EnqueueParams{Type: "noop"})
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(b.ctx))
	_, err = b.store.GetJob(b.ctx, res[0].Job.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)

	tx, err = b.store.Pool().Begin(b.ctx)
	require.NoError(t, err)
	res, err = db.EnqueueTx(b.ctx, tx, jobs.EnqueueParams{Type: "noop"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(b.ctx))
	_, err = b.store.GetJob(b.ctx, res[0].Job.ID)
	require.NoError(t, err)
}

func ids(js []*jobs.Job) []uuid.UUID {
	out := make([]uuid.UUID, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
