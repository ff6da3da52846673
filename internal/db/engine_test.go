package db_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestConcurrentClaims has ten claimers race for a thousand jobs: every job
// must be claimed exactly once and none left behind.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const total, claimers = 1000, 10
	params := make([]jobs.EnqueueParams, total)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "noop", Priority: 1 + i%3}
	}
	_, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)

	var mu sync.Mutex
	claimedBy := map[uuid.UUID]string{}
	var dup []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("w%d", w)
			<-start
			for {
				got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: worker, Limit: 7, LeaseTTL: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					if prev, ok := claimedBy[j.ID]; ok {
						dup = append(dup, fmt.Sprintf("%s by %s and %s", j.ID, prev, worker))
					}
					claimedBy[j.ID] = worker
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Empty(t, dup, "jobs claimed twice")
	require.Len(t, claimedBy, total, "every job claimed")
	var left int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE status <> 'running' OR attempt <> 1`).Scan(&left))
	require.Zero(t, left)
	workers := map[string]bool{}
	for _, w := range claimedBy {
		workers[w] = true
	}
	require.Greater(t, len(workers), 1, "claims were spread over workers")
}

// TestFencing: a worker whose lease expired and whose job was reclaimed by
// another worker can no longer complete, fail or extend it.
func TestFencing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{})
	stale := b.claim(t, "w-stale", 1, time.Minute)[0]
	staleLease := domain.LeaseOf(stale)

	// Its lease expires (the worker hung) and the reaper takes the job back.
	past := time.Now().Add(2 * time.Minute)
	reaped, err := b.store.ReapExpired(b.ctx, &past, 10)
	require.NoError(t, err)
	require.Len(t, reaped, 1)
	require.Equal(t, jobs.StateQueued, reaped[0].Status)
	fresh := b.claim(t, "w-fresh", 1, time.Minute)[0]
	require.Equal(t, j.ID, fresh.ID)
	require.Equal(t, jobs.StateRunning, fresh.Status)
	require.NotEqual(t, *stale.LeaseToken, *fresh.LeaseToken)

	// The stale worker tries everything.
	st, err := b.store.ExtendLeases(b.ctx, []domain.Heartbeat{{Lease: staleLease}}, time.Hour)
	require.NoError(t, err)
	require.Empty(t, st, "stale lease must not be extended")
	for _, outcome := range []domain.Outcome{domain.OutcomeSucceeded, domain.OutcomeFailed, domain.OutcomeCancelled, domain.OutcomeInterrupted} {
		moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: staleLease, Outcome: outcome, Error: "stale", RetryDelay: time.Second}})
		require.NoError(t, err)
		require.True(t, moved[0].LeaseLost(), "stale %s must be refused", outcome)
	}
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateRunning, got.Status)
	require.Equal(t, *fresh.LeaseToken, *got.LeaseToken)
	require.Equal(t, "w-fresh", *got.WorkerID)
	require.Equal(t, 1, got.Attempt, "the interrupted attempt was refunded")

	// The fresh worker's lease still works, in a batch mixed with the stale one.
	st, err = b.store.ExtendLeases(b.ctx, []domain.Heartbeat{{Lease: staleLease}, {Lease: domain.LeaseOf(fresh)}}, time.Hour)
	require.NoError(t, err)
	require.Len(t, st, 1)
	require.Equal(t, j.ID, st[0].JobID)
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{
		{Lease: staleLease, Outcome: domain.OutcomeFailed, Error: "stale"},
		{Lease: domain.LeaseOf(fresh), Outcome: domain.OutcomeSucceeded},
	})
	require.NoError(t, err)
	require.True(t, moved[0].LeaseLost())
	require.Equal(t, jobs.StateCompleted, moved[1].Status)

	got, err = b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	ex, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.Len(t, ex, 2)
	require.Equal(t, domain.OutcomeInterrupted, ex[0].Outcome)
	require.Equal(t, "w-stale", ex[0].WorkerID)
	require.Equal(t, domain.OutcomeSucceeded, ex[1].Outcome)
	require.Equal(t, "w-fresh", ex[1].WorkerID)
}

func TestRetriesThenDLQ(t *testing.T) {
	t.Parallel()
	b := setup(t)
	two := 2
	j := b.enqueue(t, jobs.EnqueueParams{MaxRetries: &two})
	for attempt := 1; attempt <= 3; attempt++ {
		c := b.claim(t, "w", 1, time.Minute)
		require.Len(t, c, 1, "attempt %d", attempt)
		require.Equal(t, attempt, c[0].Attempt)
		moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeFailed,
			Error: fmt.Sprintf("boom %d", attempt), RetryDelay: time.Hour}})
		require.NoError(t, err)
		if attempt < 3 {
			require.Equal(t, jobs.StateScheduled, moved[0].Status)
			got, err := b.store.GetJob(b.ctx, j.ID)
			require.NoError(t, err)
			require.WithinDuration(t, time.Now().Add(time.Hour), got.RunAt, time.Minute, "backoff delay applied")
			later := time.Now().Add(2 * time.Hour)
			_, err = b.store.PromoteDue(b.ctx, &later, 10)
			require.NoError(t, err)
		} else {
			require.Equal(t, jobs.StateDeadLetter, moved[0].Status)
		}
	}
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, "boom 3", *got.LastError)
	require.NotNil(t, got.FinishedAt)

	// Replay from the DLQ: attempts reset, runs again.
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Statuses: []jobs.State{jobs.StateDeadLetter}})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	replayed, err := b.store.RetryDLQ(b.ctx, nil)
	require.NoError(t, err)
	require.Len(t, replayed, 1)
	require.Equal(t, jobs.StateQueued, replayed[0].Status)
	require.Zero(t, replayed[0].Attempt)
	c := b.claim(t, "w", 1, time.Minute)
	require.Len(t, c, 1)
	require.Equal(t, 1, c[0].Attempt)
	require.Equal(t, 4, c[0].Executions)
}

func TestReaperRefundsAndParksPoisonPills(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{})
	for i := 1; i <= domain.DefaultMaxInterruptions; i++ {
		c := b.claim(t, fmt.Sprintf("w%d", i), 1, time.Minute)
		require.Len(t, c, 1, "run %d", i)
		require.Equal(t, 1, c[0].Attempt, "interrupted attempts are refunded")
		later := time.Now().Add(2 * time.Minute)
		moved, err := b.store.ReapExpired(b.ctx, &later, 10)
		require.NoError(t, err)
		require.Len(t, moved, 1)
		if i < domain.DefaultMaxInterruptions {
			require.Equal(t, jobs.StateQueued, moved[0].Status)
		} else {
			require.Equal(t, jobs.StateDeadLetter, moved[0].Status, "a job that kills its worker every time is parked")
		}
	}
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, domain.DefaultMaxInterruptions, got.Interruptions)
	require.Contains(t, *got.LastError, "poison pill")
	ex, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.Len(t, ex, domain.DefaultMaxInterruptions)
	for _, e := range ex {
		require.Equal(t, domain.OutcomeInterrupted, e.Outcome)
	}
}

func TestReaperLeavesLiveLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{})
	b.claim(t, "w", 1, time.Minute)
	moved, err := b.store.ReapExpired(b.ctx, nil, 10)
	require.NoError(t, err)
	require.Empty(t, moved)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	waiting := b.enqueue(t, jobs.EnqueueParams{})
	got, err := b.store.CancelJob(b.ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCancelled, got.Status)
	require.NotNil(t, got.FinishedAt)

	running := b.enqueue(t, jobs.EnqueueParams{})
	c := b.claim(t, "w", 1, time.Minute)[0]
	got, err = b.store.CancelJob(b.ctx, running.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateRunning, got.Status)
	require.True(t, got.CancelRequested)
	st, err := b.store.ExtendLeases(b.ctx, []domain.Heartbeat{{Lease: domain.LeaseOf(c)}}, time.Minute)
	require.NoError(t, err)
	require.True(t, st[0].CancelRequested, "the heartbeat tells the worker")
	// A failure after a cancel request ends cancelled, not retried.
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c), Outcome: domain.OutcomeFailed, Error: "context canceled"}})
	require.NoError(t, err)
	require.Equal(t, jobs.StateCancelled, moved[0].Status)

	_, err = b.store.CancelJob(b.ctx, running.ID)
	var te *domain.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, jobs.StateCancelled, te.From)
	_, err = b.store.CancelJob(b.ctx, uuid.New())
	require.ErrorIs(t, err, domain.ErrNotFound)
}

func TestBinDeleteRestorePurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{})
	keep := b.enqueue(t, jobs.EnqueueParams{})

	require.ErrorIs(t, b.store.PurgeJob(b.ctx, j.ID), domain.ErrInvalidTransition, "purge only from the bin")
	del, err := b.store.DeleteJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.NotNil(t, del.DeletedAt)
	require.Equal(t, jobs.StateQueued, del.Status, "binning keeps the state")
	_, err = b.store.DeleteJob(b.ctx, j.ID)
	require.ErrorIs(t, err, domain.ErrInvalidTransition)

	// Binned jobs are neither listed nor claimed.
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{keep.ID}, ids(page.Jobs))
	bin, err := b.store.ListJobs(b.ctx, domain.ListParams{InBin: true})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{j.ID}, ids(bin.Jobs))
	c := b.claim(t, "w", 10, time.Minute)
	require.Equal(t, []uuid.UUID{keep.ID}, ids(c))

	res, err := b.store.RestoreJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Nil(t, res.DeletedAt)
	require.Equal(t, []uuid.UUID{j.ID}, ids(b.claim(t, "w", 10, time.Minute)), "restored job runs")

	_, err = b.store.DeleteJob(b.ctx, keep.ID)
	require.NoError(t, err)
	require.ErrorIs(t, b.store.PurgeJob(b.ctx, keep.ID), domain.ErrInvalidTransition, "running job stays until its worker lets go")
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSucceeded}})
	require.NoError(t, err)
	require.NoError(t, b.store.PurgeJob(b.ctx, keep.ID))
	_, err = b.store.GetJob(b.ctx, keep.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// TestGetJobs reads a set of rows in one query: binned jobs included,
// unknown and purged ids left out.
func TestGetJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.enqueue(t, jobs.EnqueueParams{})
	binned := b.enqueue(t, jobs.EnqueueParams{})
	_, err := b.store.DeleteJob(b.ctx, binned.ID)
	require.NoError(t, err)
	purged := b.enqueue(t, jobs.EnqueueParams{})
	_, err = b.store.DeleteJob(b.ctx, purged.ID)
	require.NoError(t, err)
	require.NoError(t, b.store.PurgeJob(b.ctx, purged.ID))

	got, err := b.store.GetJobs(b.ctx, []uuid.UUID{a.ID, binned.ID, purged.ID, uuid.New()})
	require.NoError(t, err)
	byID := map[uuid.UUID]*jobs.Job{}
	for _, j := range got {
		byID[j.ID] = j
	}
	require.Len(t, byID, 2)
	require.Equal(t, jobs.StateQueued, byID[a.ID].Status)
	require.NotNil(t, byID[binned.ID].DeletedAt)

	none, err := b.store.GetJobs(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	params := make([]jobs.EnqueueParams, 25)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "noop", Queue: []string{"a", "b"}[i%2]}
	}
	res, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)

	var seen []uuid.UUID
	cursor := ""
	pages := 0
	for {
		page, err := b.store.ListJobs(b.ctx, domain.ListParams{Limit: 10, Cursor: cursor})
		require.NoError(t, err)
		seen = append(seen, ids(page.Jobs)...)
		pages++
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	require.Equal(t, 3, pages)
	require.Len(t, seen, 25)
	require.Equal(t, res[24].Job.ID, seen[0], "newest first")
	require.Equal(t, res[0].Job.ID, seen[24])

	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Queue: "a", Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 13)
	page, err = b.store.ListJobs(b.ctx, domain.ListParams{Q: res[3].Job.ID.String()})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{res[3].Job.ID}, ids(page.Jobs))

	_, err = b.store.ListJobs(b.ctx, domain.ListParams{Cursor: "garbage"})
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "cursor", ve.Field)
	_, err = b.store.ListJobs(b.ctx, domain.ListParams{Q: "a\x00b"})
	require.ErrorAs(t, err, &ve)
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{Queue: "q1"})
	b.enqueue(t, jobs.EnqueueParams{Queue: "q2", Type: "sleep", Payload: []byte(`{"ms":1}`)})
	c := b.claim(t, "w", 1, time.Minute)
	_, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSucceeded}})
	require.NoError(t, err)
	st, err := b.store.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.ByStatus["completed"])
	require.Equal(t, int64(1), st.ByStatus["queued"])
	require.Equal(t, int64(1), st.ByType["sleep"]["queued"]+st.ByType["sleep"]["completed"])
	require.Len(t, st.Throughput, 1)
	require.Equal(t, int64(1), st.Throughput[0].Outcomes["succeeded"])
}
