package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestRetentionDropsDays: retention drops whole day partitions once the
// day is past its state's retention, leaves younger days and other states
// alone, and keeps the counts equal to a scan.
func TestRetentionDropsDays(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	var batch []jobs.EnqueueParams
	for i := range 40 {
		batch = append(batch, jobs.EnqueueParams{Type: fmt.Sprintf("t%d", i%2), Queue: "r", MaxRetries: &zero,
			IdempotencyKey: fmt.Sprintf("r-%d", i)})
	}
	_, err := store.Enqueue(ctx, batch...)
	require.NoError(t, err)
	ids := finishAll(t, store, "r", domain.OutcomeSucceeded)
	// Spread them over four days back, two of them dead-lettered.
	now := time.Now().UTC()
	_, err = store.Pool().Exec(ctx, `
		UPDATE jobs SET finished_at = $2::timestamptz - ((row_number - 1) % 4) * interval '1 day',
		                updated_at = $2::timestamptz - ((row_number - 1) % 4) * interval '1 day',
		                status = CASE WHEN row_number <= 2 THEN 'dead_letter' ELSE status END
		FROM (SELECT id AS rid, row_number() OVER (ORDER BY id) FROM jobs WHERE id = ANY($1)) r WHERE id = r.rid`,
		ids, now)
	require.NoError(t, err)
	require.Equal(t, 40, archiveAll(t, store))
	parts, err := store.HistoryPartitions(ctx)
	require.NoError(t, err)
	require.Len(t, parts, 4+2, "four days of completed jobs, two of dead-letter ones")
	requireCounts(t, store, "archived")

	st := domain.DefaultSettings()
	st.RetentionCompletedDays, st.RetentionDeadDays = 2, 30
	dropped, err := store.DropExpiredHistory(ctx, st, &now)
	require.NoError(t, err)
	// A day goes once it ended before now-2d: three days ago, not two
	// (part of that day is younger than two days).
	require.Equal(t, []string{"job_history_completed_" + now.AddDate(0, 0, -3).Format("20060102")}, dropped)
	var left int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM job_history`).Scan(&left))
	require.Equal(t, 30, left, "the ten jobs of three days ago went")
	requireCounts(t, store, "dropped")
	// Their keys went with them; the others are still taken.
	var gone, kept string
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT min(idempotency_key) FROM job_history`).Scan(&kept))
	for i := range 40 {
		k := fmt.Sprintf("r-%d", i)
		var n int
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM job_history WHERE idempotency_key = $1`, k).Scan(&n))
		if n == 0 {
			gone = k
			break
		}
	}
	require.NotEmpty(t, gone)
	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "r2", IdempotencyKey: gone},
		jobs.EnqueueParams{Type: "t0", Queue: "r2", IdempotencyKey: kept})
	require.NoError(t, err)
	require.True(t, res[0].Inserted, "a dropped day's key is free again")
	require.False(t, res[1].Inserted, "a kept day's key is still taken")
	again, err := store.DropExpiredHistory(ctx, st, &now)
	require.NoError(t, err)
	require.Empty(t, again)

	// Keeping for ever (0) drops nothing.
	st.RetentionCompletedDays = 0
	later := now.AddDate(1, 0, 0)
	dropped, err = store.DropExpiredHistory(ctx, st, &later)
	require.NoError(t, err)
	require.Len(t, dropped, 2, "only the dead-letter days, past 30 days a year on")
	requireCounts(t, store, "a year on")

}

// TestArchivedJobFinishedDaysLaterIsFound: a job that finished days after
// it was created is found by id once archived.
func TestArchivedJobFinishedDaysLaterIsFound(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	old, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "late", MaxRetries: &zero})
	require.NoError(t, err)
	finishAll(t, store, "late", domain.OutcomeSucceeded)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET finished_at = now() + interval '3 days' WHERE id = $1`, old[0].Job.ID)
	require.NoError(t, err)
	_, err = store.Archive(ctx, -4*24*time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, "history", whereIs(t, store, old[0].Job.ID))
	got, err := store.GetJob(ctx, old[0].Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, got.Status)
}

// TestArchiveAfterAnotherProcessDroppedTheDay: a store that created a day
// partition and still thinks it exists moves jobs of that day after
// another process dropped it (it creates it again).
func TestArchiveAfterAnotherProcessDroppedTheDay(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	finishOne := func() uuid.UUID {
		_, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "x", MaxRetries: &zero})
		require.NoError(t, err)
		return finishAll(t, store, "x", domain.OutcomeSucceeded)[0]
	}
	finishOne()
	require.Equal(t, 1, archiveAll(t, store))
	parts, err := store.HistoryPartitions(ctx)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	_, err = store.Pool().Exec(ctx, `DROP TABLE `+parts[0].Name) // as another process's retention would
	require.NoError(t, err)

	id := finishOne()
	require.Equal(t, 1, archiveAll(t, store))
	require.Equal(t, "history", whereIs(t, store, id))
}
