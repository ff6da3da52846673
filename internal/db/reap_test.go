package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestReaperCountsUnrecordedStartsAsInterruptions: of two jobs claimed
// into a buffer whose worker died, one had its start recorded and one did
// not. Both are interruptions: the pool records a start lazily (for
// handlers still running after a few milliseconds), so a job whose start
// is not recorded may have crashed its process at once, and a poison pill
// that does so must still reach the DLQ.
func TestReaperCountsUnrecordedStartsAsInterruptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{})
	b.enqueue(t, jobs.EnqueueParams{})
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 2, LeaseTTL: time.Minute, Buffered: true})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.NoError(t, b.store.StartJobs(b.ctx, []domain.Start{{Lease: domain.LeaseOf(got[0]), At: time.Now()}}))
	later := time.Now().Add(2 * time.Minute)
	moved, err := b.store.ReapExpired(b.ctx, &later, 10)
	require.NoError(t, err)
	require.Len(t, moved, 2)
	for _, c := range got {
		j, err := b.store.GetJob(b.ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, jobs.StateQueued, j.Status)
		require.Equal(t, 1, j.Interruptions, "a start not recorded may still have crashed its worker")
		require.Equal(t, 0, j.Attempt, "the attempt is refunded")
	}
}
