package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestFinishIsolatesARefusedOutcome: one outcome whose result the
// database refuses (past every check, as a bug elsewhere could send it)
// neither fails nor re-runs the outcomes batched with it; it is written
// as a failure that says why.
func TestFinishIsolatesARefusedOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 5 {
		b.enqueue(t, jobs.EnqueueParams{})
	}
	claimed := b.claim(t, "w1", 5, time.Minute)
	require.Len(t, claimed, 5)
	batch := make([]domain.Finish, len(claimed))
	for i, j := range claimed {
		batch[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded, Result: []byte(`{"ok": true}`)}
	}
	batch[2].Result = []byte(`{"x": "\ud800"}`) // a lone surrogate: jsonb refuses it
	finished, _, err := b.store.FinishJobs(b.ctx, batch)
	require.NoError(t, err)
	require.Len(t, finished, 5)
	for i, m := range finished {
		j, err := b.store.GetJob(b.ctx, claimed[i].ID)
		require.NoError(t, err)
		if i == 2 {
			require.Equal(t, jobs.StateScheduled, m.Status, "the refused outcome is a failure, retried")
			require.Equal(t, jobs.StateScheduled, j.Status)
			require.NotNil(t, j.LastError)
			require.Contains(t, *j.LastError, "could not be stored")
			require.Nil(t, j.Result)
			continue
		}
		require.Equal(t, jobs.StateCompleted, m.Status, "outcome %d", i)
		require.Equal(t, jobs.StateCompleted, j.Status)
		require.JSONEq(t, `{"ok": true}`, string(j.Result))
	}
}
