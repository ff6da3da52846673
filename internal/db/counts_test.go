package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// countsByScan is what Stats must report, counted the slow way: one scan
// of every job.
func countsByScan(t *testing.T, store *db.Store) (byStatus map[string]int64, byQueue, byType map[string]map[string]int64, bin int64) {
	t.Helper()
	ctx := context.Background()
	byStatus, byQueue, byType = map[string]int64{}, map[string]map[string]int64{}, map[string]map[string]int64{}
	rows, err := store.Pool().Query(ctx, `SELECT queue, type, status, count(*) FROM (
		SELECT queue, type, status FROM jobs WHERE deleted_at IS NULL
		UNION ALL SELECT queue, type, status FROM job_history) j GROUP BY 1, 2, 3`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var q, ty, st string
		var n int64
		require.NoError(t, rows.Scan(&q, &ty, &st, &n))
		byStatus[st] += n
		if byQueue[q] == nil {
			byQueue[q] = map[string]int64{}
		}
		byQueue[q][st] += n
		if byType[ty] == nil {
			byType[ty] = map[string]int64{}
		}
		byType[ty][st] += n
	}
	require.NoError(t, rows.Err())
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE deleted_at IS NOT NULL`).Scan(&bin))
	return byStatus, byQueue, byType, bin
}

// requireCounts checks every count Stats, the overview and the metrics
// read against a scan.
func requireCounts(t *testing.T, store *db.Store, step string) {
	t.Helper()
	ctx := context.Background()
	byStatus, byQueue, byType, bin := countsByScan(t, store)
	st, err := store.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, byStatus, st.ByStatus, step)
	require.Equal(t, byQueue, st.ByQueue, step)
	require.Equal(t, byType, st.ByType, step)
	require.Equal(t, bin, st.Bin, step)
	counts, err := store.CappedCounts(ctx, jobs.States, 1_000_000)
	require.NoError(t, err)
	for _, c := range counts {
		require.Equal(t, byStatus[string(c.State)], c.Count, "%s: %s on the overview", step, c.State)
	}
	sq, err := store.StateQueueCounts(ctx)
	require.NoError(t, err)
	for q, m := range byQueue {
		for s, n := range m {
			require.Equal(t, n, sq[[2]string{s, q}], "%s: metrics %s/%s", step, s, q)
		}
	}
}

// finishAll claims every queued job of queue and ends each with outcome.
func finishAll(t *testing.T, store *db.Store, queue string, outcome domain.Outcome) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var ids []uuid.UUID
	for {
		claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: 100, LeaseTTL: time.Minute})
		require.NoError(t, err)
		if len(claimed) == 0 {
			return ids
		}
		batch := make([]domain.Finish, len(claimed))
		for i, j := range claimed {
			batch[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: outcome, Error: "x"}
			ids = append(ids, j.ID)
		}
		_, _, err = store.FinishJobs(ctx, batch)
		require.NoError(t, err)
	}
}

// TestFinishedCountsFollowEveryPath: the counts of finished and binned jobs
// that triggers keep stay equal to a full scan through every way a job
// enters or leaves those states.
func TestFinishedCountsFollowEveryPath(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero, one := 0, 1
	requireCounts(t, store, "empty")

	// Enqueue: single, a COPY batch, keyed duplicates, dependencies.
	batch := make([]jobs.EnqueueParams, 200)
	for i := range batch {
		batch[i] = jobs.EnqueueParams{Type: fmt.Sprintf("t%d", i%3), Queue: "a", MaxRetries: &zero}
	}
	_, err := store.Enqueue(ctx, batch...)
	require.NoError(t, err)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "b", MaxRetries: &one, IdempotencyKey: "k1"},
		jobs.EnqueueParams{Type: "t0", Queue: "b", MaxRetries: &one, IdempotencyKey: "k1"})
	require.NoError(t, err)
	parent, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t1", Queue: "c", MaxRetries: &zero})
	require.NoError(t, err)
	child, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t2", Queue: "c", DependsOn: []uuid.UUID{parent[0].Job.ID}})
	require.NoError(t, err)
	requireCounts(t, store, "enqueued")

	// Finish: succeeded, failed to the DLQ, failed with a retry left,
	// cancelled by the handler; a failed parent cancels its child.
	finishAll(t, store, "a", domain.OutcomeSucceeded)
	requireCounts(t, store, "succeeded")
	dead := finishAll(t, store, "c", domain.OutcomeFailed)
	requireCounts(t, store, "dead letter and cascade")
	finishAll(t, store, "b", domain.OutcomeFailed)
	requireCounts(t, store, "retry scheduled")
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() WHERE status = 'scheduled'`)
	require.NoError(t, err)
	_, err = store.PromoteDue(ctx, nil, 100)
	require.NoError(t, err)
	finishAll(t, store, "b", domain.OutcomeCancelled)
	requireCounts(t, store, "cancelled by its handler")
	_, err = store.GetJob(ctx, child[0].Job.ID)
	require.NoError(t, err)

	countsThroughOperatorActions(t, store, dead)

	// A lease that expires for good ends in the DLQ through the reaper.
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "e"})
	require.NoError(t, err)
	_, err = store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"e"}, Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET interruptions = 99 WHERE queue = 'e'`)
	require.NoError(t, err)
	later := time.Now().Add(time.Hour)
	_, err = store.ReapExpired(ctx, &later, 100)
	require.NoError(t, err)
	requireCounts(t, store, "reaped")

	// History written with COPY, then retention removes what is old.
	require.NoError(t, store.SeedHistory(ctx, db.History{Jobs: 3000, Days: 30}, nil))
	requireCounts(t, store, "seeded history")
	st := domain.DefaultSettings()
	st.RetentionCompletedDays, st.RetentionCancelledDays, st.RetentionDeadDays = 10, 10, 10
	for {
		n, err := store.Prune(ctx, st, nil, 500)
		require.NoError(t, err)
		if n == 0 {
			break
		}
	}
	requireCounts(t, store, "pruned")
}

// countsThroughOperatorActions requires the counts to stay right as an
// operator cancels a waiting job, bins and restores, purges, replays from
// the DLQ (dead holds dead-lettered jobs of queue c), and edits and
// replays.
func countsThroughOperatorActions(t *testing.T, store *db.Store, dead []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	w, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "d"}, jobs.EnqueueParams{Type: "t0", Queue: "d"})
	require.NoError(t, err)
	_, err = store.CancelJob(ctx, w[0].Job.ID)
	require.NoError(t, err)
	requireCounts(t, store, "cancelled while waiting")
	_, err = store.DeleteJob(ctx, w[0].Job.ID)
	require.NoError(t, err)
	_, err = store.DeleteJob(ctx, w[1].Job.ID)
	require.NoError(t, err)
	requireCounts(t, store, "binned")
	_, err = store.RestoreJob(ctx, w[0].Job.ID)
	require.NoError(t, err)
	requireCounts(t, store, "restored")
	require.NoError(t, store.PurgeJob(ctx, w[1].Job.ID))
	requireCounts(t, store, "purged")
	_, err = store.RetryDLQ(ctx, dead[:1])
	require.NoError(t, err)
	requireCounts(t, store, "replayed from the DLQ")
	_, _, err = store.EditAndReplay(ctx, dead[0], json.RawMessage(`{"fixed":true}`), domain.AuditEntry{Actor: "t", Source: "api"})
	if err != nil {
		// The job went back to queued above; put another one through.
		more := finishAll(t, store, "c", domain.OutcomeFailed)
		require.NotEmpty(t, more)
		_, _, err = store.EditAndReplay(ctx, more[0], json.RawMessage(`{"fixed":true}`), domain.AuditEntry{Actor: "t", Source: "api"})
		require.NoError(t, err)
	}
	requireCounts(t, store, "edited and replayed")
}

// TestFinishedCountsUnderConcurrentFinishers: many finishers at once, on
// the same queue and type (the same counter rows), lose no count and do
// not deadlock.
func TestFinishedCountsUnderConcurrentFinishers(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	params := make([]jobs.EnqueueParams, 2000)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: fmt.Sprintf("t%d", i%2), Queue: fmt.Sprintf("q%d", i%3), MaxRetries: &zero}
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	finishConcurrently(t, store, 12, 7)
	requireCounts(t, store, "after concurrent finishers")
	st, err := store.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2000), st.ByStatus["completed"]+st.ByStatus["dead_letter"]+st.ByStatus["cancelled"])
}

// finishConcurrently runs finishers goroutines, each claiming up to limit
// jobs at a time and ending them (succeeded, failed or cancelled by
// goroutine), until no job is left to claim.
func finishConcurrently(t *testing.T, store *db.Store, finishers, limit int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range finishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outcome := []domain.Outcome{domain.OutcomeSucceeded, domain.OutcomeFailed, domain.OutcomeCancelled}[g%3]
			for {
				claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: fmt.Sprint("w", g), Limit: limit, LeaseTTL: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				if len(claimed) == 0 {
					return
				}
				b := make([]domain.Finish, len(claimed))
				for i, j := range claimed {
					b[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: outcome, Error: "x"}
				}
				if _, _, err := store.FinishJobs(ctx, b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
