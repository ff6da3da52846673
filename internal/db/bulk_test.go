package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestBulkOperations: the many-job forms of cancel, retry, delete and
// restore do what the one-job forms do (cascade, re-arm, stop a running
// job) and leave out the jobs whose state does not allow them.
func TestBulkOperations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0
	ids := func(js []*jobs.Job) []uuid.UUID {
		out := []uuid.UUID{}
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}

	// Cancel: a waiting job with a dependent, a running one, a finished one.
	waiting := b.enqueue(t, jobs.EnqueueParams{Queue: "later", RunAt: new(time.Now().Add(time.Hour))})
	child := b.enqueue(t, jobs.EnqueueParams{Queue: "later", DependsOn: []uuid.UUID{waiting.ID}})
	b.enqueue(t, jobs.EnqueueParams{Queue: "run"})
	running := b.claimFirstOf(t, "run")
	b.enqueue(t, jobs.EnqueueParams{Queue: "done"})
	done := b.claimFirstOf(t, "done")
	b.finish(t, done, domain.Finish{Outcome: domain.OutcomeSucceeded})
	js, err := b.store.CancelJobs(b.ctx, []uuid.UUID{waiting.ID, running.ID, done.ID})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{waiting.ID, running.ID}, ids(js))
	require.Equal(t, jobs.StateCancelled, b.status(t, waiting.ID))
	require.Equal(t, jobs.StateCancelled, b.status(t, child.ID), "what depended on it, with it")
	r, err := b.store.GetJob(b.ctx, running.ID)
	require.NoError(t, err)
	require.True(t, r.CancelRequested, "a running job is asked to stop")
	require.Equal(t, jobs.StateCompleted, b.status(t, done.ID))

	// Retry: a dead-letter job (re-arming its dependent), a scheduled one,
	// and the completed one, which is left out.
	dead := b.enqueue(t, jobs.EnqueueParams{Queue: "fail", MaxRetries: &zero})
	dependent := b.enqueue(t, jobs.EnqueueParams{Queue: "after", DependsOn: []uuid.UUID{dead.ID}})
	b.finish(t, b.claimFirstOf(t, "fail"), domain.Finish{Outcome: domain.OutcomeFailed, Error: "boom"})
	require.Equal(t, jobs.StateCancelled, b.status(t, dependent.ID))
	later := b.enqueue(t, jobs.EnqueueParams{Queue: "later", RunAt: new(time.Now().Add(time.Hour))})
	js, err = b.store.RetryJobs(b.ctx, []uuid.UUID{dead.ID, later.ID, done.ID})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{dead.ID, later.ID}, ids(js))
	require.Equal(t, jobs.StateQueued, b.status(t, dead.ID))
	require.Equal(t, jobs.StateQueued, b.status(t, later.ID))
	require.Equal(t, jobs.StateBlocked, b.status(t, dependent.ID), "re-armed")

	// Delete to the bin and restore; a job already in the bin is left out.
	js, err = b.store.DeleteJobs(b.ctx, []uuid.UUID{done.ID, later.ID})
	require.NoError(t, err)
	require.Len(t, js, 2)
	js, err = b.store.DeleteJobs(b.ctx, []uuid.UUID{done.ID})
	require.NoError(t, err)
	require.Empty(t, js)
	js, err = b.store.RestoreJobs(b.ctx, []uuid.UUID{done.ID, later.ID, dead.ID})
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{done.ID, later.ID}, ids(js))
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{InBin: true})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
}
