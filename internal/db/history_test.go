package db_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The seeded history looks like the engine's: the promised mix of states,
// one execution per job with its outcome, ten types, five queues, creation
// spread over the days asked for, ids in creation order; and the engine
// works on it (listing, DLQ replay).
func TestSeedHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var reported []int
	require.NoError(t, b.store.SeedHistory(b.ctx, db.History{Jobs: 2000, Days: 7, Live: true}, func(done int) { reported = append(reported, done) }))
	require.Equal(t, []int{2000}, reported)

	count := func(sql string, args ...any) int {
		var n int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, sql, args...).Scan(&n))
		return n
	}
	require.Equal(t, 1800, count(`SELECT count(*) FROM jobs WHERE status = 'completed'`))
	require.Equal(t, 100, count(`SELECT count(*) FROM jobs WHERE status = 'dead_letter'`))
	require.Equal(t, 100, count(`SELECT count(*) FROM jobs WHERE status = 'cancelled'`))
	require.Equal(t, 10, count(`SELECT count(DISTINCT type) FROM jobs`))
	require.Equal(t, 10, count(`SELECT count(DISTINCT type) FROM jobs WHERE status = 'dead_letter'`), "failures of every type")
	require.Equal(t, 5, count(`SELECT count(DISTINCT queue) FROM jobs WHERE status = 'cancelled'`), "cancellations in every queue")
	require.Equal(t, 5, count(`SELECT count(DISTINCT queue) FROM jobs`))
	require.Equal(t, 2000, count(`SELECT count(*) FROM job_executions`))
	require.Zero(t, count(`SELECT count(*) FROM jobs j JOIN job_executions e ON e.job_id = j.id
		WHERE (j.status = 'completed') <> (e.outcome = 'succeeded')
		   OR (j.status = 'dead_letter') <> (e.outcome = 'failed')
		   OR e.finished_at <> j.finished_at OR e.started_at <> j.started_at`), "each execution matches its job")
	require.Zero(t, count(`SELECT count(*) FROM jobs WHERE created_at < now() - interval '7 days' OR created_at > now()`))
	require.Greater(t, count(`SELECT count(DISTINCT date_trunc('day', created_at)) FROM jobs`), 5, "spread over the days")
	require.Zero(t, count(`SELECT count(*) FROM jobs WHERE to_timestamp((('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint) / 1000.0)
		NOT BETWEEN created_at - interval '1 millisecond' AND created_at + interval '1 millisecond'`), "UUIDv7 of the creation time")

	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Statuses: []jobs.State{jobs.StateDeadLetter}, Limit: 500})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 100)
	for i := 1; i < len(page.Jobs); i++ {
		require.True(t, page.Jobs[i-1].CreatedAt.After(page.Jobs[i].CreatedAt) || page.Jobs[i-1].CreatedAt.Equal(page.Jobs[i].CreatedAt),
			"newest first, as ids are in creation order")
	}
	replayed, err := b.store.RetryJob(b.ctx, page.Jobs[0].ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, replayed.Status)
	ex, err := b.store.ListExecutions(b.ctx, page.Jobs[0])
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Equal(t, domain.OutcomeFailed, ex[0].Outcome)
}

// By default the seeded jobs move to the history as the archiver moves
// finished jobs, runs included, and read the same from there.
func TestSeedHistoryMovesToTheHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.store.SeedHistory(b.ctx, db.History{Jobs: 2000, Days: 7}, nil))
	count := func(sql string) int {
		var n int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, sql).Scan(&n))
		return n
	}
	require.Zero(t, count(`SELECT count(*) FROM jobs`))
	require.Zero(t, count(`SELECT count(*) FROM job_executions`))
	require.Equal(t, 1800, count(`SELECT count(*) FROM job_history WHERE status = 'completed'`))
	require.Equal(t, 100, count(`SELECT count(*) FROM job_history WHERE status = 'dead_letter'`))
	require.Equal(t, 100, count(`SELECT count(*) FROM job_history WHERE status = 'cancelled'`))
	require.Equal(t, 2000, count(`SELECT count(*) FROM job_history, jsonb_array_elements(execution_rows)`))
	require.Equal(t, 2000, count(`SELECT sum(n)::int FROM job_history_counts`))
	parts, err := b.store.HistoryPartitions(b.ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(parts), 3*7, "a partition per state and day")

	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Statuses: []jobs.State{jobs.StateDeadLetter}, Limit: 500})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 100)
	ex, err := b.store.ListExecutions(b.ctx, page.Jobs[0])
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Equal(t, domain.OutcomeFailed, ex[0].Outcome)
	require.Equal(t, *page.Jobs[0].FinishedAt, *ex[0].FinishedAt)
}

// Finished states are counted exactly however many there are (triggers
// keep their counts); a live state past the dashboard's cap becomes
// PostgreSQL's estimate, close to the truth once statistics are current.
func TestCappedCountsEstimateAboveTheCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.store.SeedHistory(b.ctx, db.History{Jobs: 60_000}, nil)) // 54,000 completed, 3,000 DLQ
	waiting := make([]jobs.EnqueueParams, 12_000)
	for i := range waiting {
		waiting[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "later"}
	}
	_, err := b.store.Enqueue(b.ctx, waiting...)
	require.NoError(t, err)
	_, err = b.store.Pool().Exec(b.ctx, `ANALYZE jobs`)
	require.NoError(t, err)
	counts, err := b.store.CappedCounts(b.ctx, []jobs.State{jobs.StateCompleted, jobs.StateDeadLetter, jobs.StateQueued}, 10_000)
	require.NoError(t, err)
	byState := map[jobs.State]domain.StateCount{}
	for _, c := range counts {
		byState[c.State] = c
	}
	done := byState[jobs.StateCompleted]
	require.False(t, done.Capped, "finished states are exact past the cap")
	require.EqualValues(t, 54_000, done.Count)
	require.Zero(t, done.Estimate)
	dlq := byState[jobs.StateDeadLetter]
	require.False(t, dlq.Capped)
	require.EqualValues(t, 3_000, dlq.Count)
	queued := byState[jobs.StateQueued]
	require.True(t, queued.Capped)
	require.EqualValues(t, 10_000, queued.Count)
	require.InEpsilon(t, 12_000, queued.Estimate, 0.1, "estimate %d", queued.Estimate)
}
