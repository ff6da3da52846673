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

// TestSearchLiveAndHistory: the jobs list's text search finds the same
// jobs in the live table and in the history, by idempotency key, start of
// type and part of the last error, newest first.
func TestSearchLiveAndHistory(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	types := []string{"report.build", "report.send", "email.send"}
	var params []jobs.EnqueueParams
	for i := range 24 {
		params = append(params, jobs.EnqueueParams{Type: types[i%3], Queue: "s", MaxRetries: &zero, IdempotencyKey: fmt.Sprintf("order-%d", i)})
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"s"}, Limit: 24, LeaseTTL: time.Minute})
	require.NoError(t, err)
	errs := []string{"dial tcp 10.0.0.1:443: connection refused", "context deadline exceeded (timeout)", "quota at 100% for today"}
	fin := make([]domain.Finish, len(claimed))
	for i, j := range claimed {
		fin[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeFailed, Error: errs[i%3]}
	}
	_, _, err = store.FinishJobs(ctx, fin)
	require.NoError(t, err)
	// Half of them move to the history; the others stay live.
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET updated_at = now() + interval '1 hour' WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT 12)`)
	require.NoError(t, err)
	require.Equal(t, 12, archiveAll(t, store))

	scan := func(q string) []uuid.UUID {
		return queryIDs(t, store, `SELECT id FROM (SELECT id, idempotency_key, type, last_error FROM jobs
			UNION ALL SELECT id, idempotency_key, type, last_error FROM job_history) j
			WHERE idempotency_key = $1 OR starts_with(type, $1) OR strpos(lower(last_error), lower($1)) > 0 ORDER BY id DESC`, q)
	}
	for _, q := range []string{"order-3", "order-20", "report", "report.s", "REFUSED", "timeout", "100%", "nothing like it", "order"} {
		want := scan(q)
		got := listIDs(t, store, domain.ListParams{Q: q})
		require.Equal(t, want, got, "search %q", q)
	}
	require.Len(t, listIDs(t, store, domain.ListParams{Q: "report"}), 16)
	require.Len(t, listIDs(t, store, domain.ListParams{Q: "100%"}), 8)
	require.Empty(t, listIDs(t, store, domain.ListParams{Q: "order"}), "a key matches whole")
}

// TestSearchHistoryDayByDay: the history's text search goes a day at a
// time, newest first, and stops early; over jobs spread across ten days it
// pages to exactly what a scan finds, in id order.
func TestSearchHistoryDayByDay(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	var params []jobs.EnqueueParams
	for i := range 40 {
		id, err := uuid.NewV7()
		require.NoError(t, err)
		ms := time.Now().Add(-time.Duration(40-i) * 6 * time.Hour).UnixMilli() // ten days, oldest first
		for k := 5; k >= 0; k-- {
			id[k] = byte(ms)
			ms >>= 8
		}
		params = append(params, jobs.EnqueueParams{ID: id, Type: []string{"report.build", "email.send"}[i%2], Queue: "d", MaxRetries: &zero})
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"d"}, Limit: 40, LeaseTTL: time.Minute})
	require.NoError(t, err)
	fin := make([]domain.Finish, len(claimed))
	for i, j := range claimed {
		fin[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeFailed, Error: []string{"a needle here", "nothing", "NEEDLE again"}[i%3]}
	}
	_, _, err = store.FinishJobs(ctx, fin)
	require.NoError(t, err)
	// Each finished an hour after its id was made.
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET finished_at = to_timestamp((('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint) / 1000.0) + interval '1 hour',
		updated_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	require.Equal(t, 40, archiveAll(t, store))
	parts, err := store.HistoryPartitions(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(parts), 9)

	for _, q := range []string{"needle", "report", "email.s", "nothing", "no such"} {
		want := queryIDs(t, store, `SELECT id FROM job_history WHERE starts_with(type, $1) OR strpos(lower(last_error), lower($1)) > 0 ORDER BY id DESC`, q)
		require.Equal(t, want, listIDs(t, store, domain.ListParams{Q: q}), "search %q", q)
		p := domain.ListParams{Q: q, Statuses: []jobs.State{jobs.StateDeadLetter}, Type: "report.build"}
		got := listIDs(t, store, p)
		var wantTyped []uuid.UUID
		for _, id := range want {
			j, err := store.GetJob(ctx, id)
			require.NoError(t, err)
			if j.Type == "report.build" {
				wantTyped = append(wantTyped, id)
			}
		}
		require.Equal(t, wantTyped, got, "search %q among report.build", q)
	}
}
