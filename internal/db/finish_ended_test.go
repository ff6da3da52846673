package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestFinishCountsToTheHandlersEnd: an outcome that says when its handler
// returned (domain.Finish.EndedAt) finishes the job and ends its run then,
// not when the outcome was written: a job that ran 5 ms took 5 ms however
// long its outcome waited for the batch that wrote it. An end said to be
// later than the write is the write; one before the start is the start.
func TestFinishCountsToTheHandlersEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 3 {
		b.enqueue(t, jobs.EnqueueParams{Queue: "ended"})
	}
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"ended"}, Limit: 3, LeaseTTL: time.Minute, Buffered: true})
	require.NoError(t, err)
	require.Len(t, got, 3)
	claimed := got[0].UpdatedAt // the claim's time, on the database's clock
	start, end := claimed.Add(5*time.Millisecond), claimed.Add(10*time.Millisecond)
	future, past := claimed.Add(time.Hour), claimed.Add(-time.Hour)
	time.Sleep(300 * time.Millisecond) // the outcome waits, as in a busy finish batch
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{
		{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSucceeded, StartedAt: &start, EndedAt: &end},
		{Lease: domain.LeaseOf(got[1]), Outcome: domain.OutcomeFailed, Error: "no", RetryDelay: -1, Final: true, StartedAt: &start, EndedAt: &future},
		{Lease: domain.LeaseOf(got[2]), Outcome: domain.OutcomeSucceeded, StartedAt: &start, EndedAt: &past},
	})
	require.NoError(t, err)
	written := time.Now()

	j, err := b.store.GetJob(b.ctx, got[0].ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, j.Status)
	require.WithinDuration(t, end, *j.FinishedAt, time.Millisecond, "finished when the handler returned")
	require.Equal(t, 5*time.Millisecond, j.FinishedAt.Sub(*j.StartedAt).Round(time.Millisecond))
	runs, err := b.store.ListExecutions(b.ctx, j)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, int64(5), *runs[0].DurationMS)
	require.WithinDuration(t, end, *runs[0].FinishedAt, time.Millisecond)

	j, err = b.store.GetJob(b.ctx, got[1].ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateDeadLetter, j.Status)
	require.True(t, j.FinishedAt.Before(future), "an end after the write is the write")
	require.WithinDuration(t, written, *j.FinishedAt, 10*time.Second)

	j, err = b.store.GetJob(b.ctx, got[2].ID)
	require.NoError(t, err)
	require.WithinDuration(t, start, *j.FinishedAt, time.Millisecond, "an end before the start is the start")
}
