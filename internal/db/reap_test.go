package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestReaperRequeuesBufferedClaimsUncounted: of two jobs claimed into a
// buffer whose worker died, the one whose handler had started is an
// interruption; the one that never started goes back as if never
// claimed, with no interruption counted (it cannot be a poison pill) and
// no execution recorded.
func TestReaperRequeuesBufferedClaimsUncounted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{})
	b.enqueue(t, jobs.EnqueueParams{})
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 2, LeaseTTL: time.Minute, Buffered: true})
	require.NoError(t, err)
	require.Len(t, got, 2)
	started, waiting := got[0], got[1]
	require.NoError(t, b.store.StartJobs(b.ctx, []domain.Start{{Lease: domain.LeaseOf(started), At: time.Now()}}))
	later := time.Now().Add(2 * time.Minute)
	moved, err := b.store.ReapExpired(b.ctx, &later, 10)
	require.NoError(t, err)
	require.Len(t, moved, 2)
	for _, m := range moved {
		require.Equal(t, jobs.StateQueued, m.Status)
	}
	s, err := b.store.GetJob(b.ctx, started.ID)
	require.NoError(t, err)
	require.Equal(t, 1, s.Interruptions)
	require.Equal(t, 0, s.Attempt)
	ex, err := b.store.ListExecutions(b.ctx, s)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Equal(t, domain.OutcomeInterrupted, ex[0].Outcome)

	w, err := b.store.GetJob(b.ctx, waiting.ID)
	require.NoError(t, err)
	require.Zero(t, w.Interruptions, "a job that never started interrupted nothing")
	require.Zero(t, w.Attempt)
	require.Zero(t, w.Executions)
	require.Nil(t, w.WorkerID)
	require.Nil(t, w.LastError)
	ex, err = b.store.ListExecutions(b.ctx, w)
	require.NoError(t, err)
	require.Empty(t, ex)
}
