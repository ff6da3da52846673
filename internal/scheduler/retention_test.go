package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestArchiverMovesFinishedJobsToTheHistory: the archiver's pass moves jobs
// finished longer than history_after_minutes ago, leaves younger ones, and
// moves nothing when the setting is 0.
func TestArchiverMovesFinishedJobsToTheHistory(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	// Jobs made fifteen minutes ago (their UUIDv7 ids say so).
	params := make([]jobs.EnqueueParams, 20)
	for i := range params {
		id, err := uuid.NewV7()
		require.NoError(t, err)
		ms := time.Now().Add(-15 * time.Minute).UnixMilli()
		for k := 5; k >= 0; k-- {
			id[k] = byte(ms)
			ms >>= 8
		}
		params[i] = jobs.EnqueueParams{ID: id, Type: jobs.TypeNoop, MaxRetries: &zero}
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Limit: 20, LeaseTTL: time.Minute})
	require.NoError(t, err)
	fin := make([]domain.Finish, len(claimed))
	for i, j := range claimed {
		fin[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded}
	}
	_, _, err = store.FinishJobs(ctx, fin)
	require.NoError(t, err)
	// Half of them finished ten minutes ago.
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET finished_at = now() - interval '10 minutes', updated_at = now() - interval '10 minutes'
		WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT 10)`)
	require.NoError(t, err)
	count := func(table string) (n int) {
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}

	settings := &domain.SettingsHolder{}
	st := domain.DefaultSettings()
	st.HistoryAfterMinutes = 0
	settings.Set(st)
	p := NewArchiver(ArchiveConfig{BatchSize: 3}, store, settings, quiet())
	_, _, err = p.runOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, count("job_history"), "0 keeps finished jobs in jobs")

	st.HistoryAfterMinutes = 5
	settings.Set(st)
	n, full, err := p.runOnce(ctx)
	require.NoError(t, err)
	require.True(t, full, "a full batch asks for another pass at once")
	require.Equal(t, 3, n)
	for full {
		_, full, err = p.runOnce(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 10, count("job_history"), "the jobs finished ten minutes ago")
	require.Equal(t, 10, count("jobs"), "the jobs finished just now stay")
}
