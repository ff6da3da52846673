package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestArchivedJobsComeBackToChange: replay (one and the whole DLQ), edit
// and replay, delete to the bin and a new dependency bring a job back from
// the history with its runs and log, and idempotency keys stay taken.
func TestArchivedJobsComeBackToChange(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	var batch []jobs.EnqueueParams
	for i := range 6 {
		batch = append(batch, jobs.EnqueueParams{Type: "t", Queue: "d", MaxRetries: &zero, IdempotencyKey: fmt.Sprintf("dead-%d", i)})
	}
	_, err := store.Enqueue(ctx, batch...)
	require.NoError(t, err)
	dead := finishAll(t, store, "d", domain.OutcomeFailed)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", MaxRetries: &zero, IdempotencyKey: "done-1"},
		jobs.EnqueueParams{Type: "t", Queue: "ok", MaxRetries: &zero})
	require.NoError(t, err)
	done := finishAll(t, store, "ok", domain.OutcomeSucceeded)
	require.Equal(t, 8, archiveAll(t, store))
	keysHeld := func() (n int) {
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM job_history_keys`).Scan(&n))
		return n
	}
	require.Equal(t, 7, keysHeld(), "six dead-letter keys and done-1")

	// Replay one.
	runsBefore := viewOf(t, store, dead[0]).Runs
	j, err := store.RetryJob(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, j.Status)
	require.Equal(t, "live", whereIs(t, store, dead[0]))
	require.Equal(t, runsBefore, viewOf(t, store, dead[0]).Runs, "its runs came back with it")

	// Edit and replay another.
	old, j, err := store.EditAndReplay(ctx, dead[1], json.RawMessage(`{"fixed":true}`), domain.AuditEntry{Actor: "t", Source: "api"})
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(old))
	require.Equal(t, jobs.StateQueued, j.Status)

	// Replay the rest of the DLQ, all of it in the history.
	replayed, err := store.RetryDLQ(ctx, nil)
	require.NoError(t, err)
	require.Len(t, replayed, 4)
	for _, id := range dead {
		require.Equal(t, "live", whereIs(t, store, id))
	}
	require.Equal(t, 1, keysHeld(), "the replayed jobs took their keys back to jobs")

	requireArchivedKeyTaken(t, store, done[0])

	// A new job may depend on an archived one: it comes back, and the new
	// job is ready at once (its dependency completed).
	kid, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", DependsOn: []uuid.UUID{done[1]}})
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, kid[0].Job.Status)
	require.Equal(t, "live", whereIs(t, store, done[1]))

	// Delete to the bin and restore.
	require.Equal(t, "history", whereIs(t, store, done[0]))
	binned, err := store.DeleteJob(ctx, done[0])
	require.NoError(t, err)
	require.NotNil(t, binned.DeletedAt)
	_, err = store.RestoreJob(ctx, done[0])
	require.NoError(t, err)
	require.Equal(t, "live", whereIs(t, store, done[0]))
	requireCounts(t, store, "after coming back")

	// Refusals name the state as before.
	require.Equal(t, 1, archiveAll(t, store)) // done[0], restored from the bin, moves again
	_, err = store.CancelJob(ctx, done[0])
	var te *domain.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, jobs.StateCompleted, te.From)
}

// requireArchivedKeyTaken requires that the key done-1, held by the
// archived job archived, is still taken: the same key returns that job,
// single and in a batch, and inserts nothing.
func requireArchivedKeyTaken(t *testing.T, store *db.Store, archived uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	again, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", IdempotencyKey: "done-1"})
	require.NoError(t, err)
	require.False(t, again[0].Inserted)
	require.Equal(t, archived, again[0].Job.ID)
	require.Equal(t, jobs.StateCompleted, again[0].Job.Status)
	mixed, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", IdempotencyKey: "done-1"},
		jobs.EnqueueParams{Type: "t", Queue: "ok", IdempotencyKey: "fresh"})
	require.NoError(t, err)
	require.False(t, mixed[0].Inserted)
	require.Equal(t, archived, mixed[0].Job.ID)
	require.True(t, mixed[1].Inserted)
	var holders int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE idempotency_key = 'done-1'`).Scan(&holders))
	require.Zero(t, holders, "no second job holds the key")
}

// TestChangesWaitOutAMoveUnderWay: a replay, a delete to the bin and a new
// dependency that reach a job while the archiver's move of it is under way
// wait for the move and then find the job in the history (they used to
// find it nowhere: "not found").
func TestChangesWaitOutAMoveUnderWay(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	_, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "m", MaxRetries: &zero},
		jobs.EnqueueParams{Type: "t", Queue: "m", MaxRetries: &zero}, jobs.EnqueueParams{Type: "t", Queue: "m", MaxRetries: &zero})
	require.NoError(t, err)
	dead := finishAll(t, store, "m", domain.OutcomeFailed)
	require.Len(t, dead, 3)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET status = 'completed', last_error = NULL WHERE id = $1`, dead[2])
	require.NoError(t, err)
	ops := []func() error{
		func() error { _, err := store.RetryJob(ctx, dead[0]); return err },
		func() error { _, err := store.DeleteJob(ctx, dead[1]); return err },
		func() error {
			_, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "n", DependsOn: []uuid.UUID{dead[2]}})
			return err
		},
	}
	for i, op := range ops {
		id := dead[i]
		var status string
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT status FROM jobs WHERE id = $1`, id).Scan(&status))
		// Only this job may move now.
		_, err := store.Pool().Exec(ctx, `UPDATE jobs SET updated_at = CASE WHEN id = $1 THEN now() - interval '1 minute' ELSE now() + interval '1 hour' END`, id)
		require.NoError(t, err)
		now := time.Now().Add(time.Minute)
		day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		// The day's partition first, as Archive makes it; then a move of
		// this job, held open in a transaction.
		require.NoError(t, store.EnsureHistoryPartitions(ctx, status, []time.Time{day}))
		tx, err := store.Pool().Begin(ctx)
		require.NoError(t, err)
		var moved int
		err = tx.QueryRow(ctx, db.ArchiveSQL, db.ArchiveArgs(status, now, []time.Time{day}, 10)...).Scan(&moved)
		if err != nil || moved != 1 {
			_ = tx.Rollback(ctx)
			t.Fatalf("op %d: the move of %s (%s): %d moved, %v", i, id, status, moved, err)
		}
		done := make(chan error, 1)
		go func() { done <- op() }()
		select {
		case err := <-done:
			t.Fatalf("op %d did not wait for the move: %v", i, err)
		case <-time.After(300 * time.Millisecond):
		}
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, <-done, "op %d after the move", i)
		require.Equal(t, "live", whereIs(t, store, id), "op %d brought the job back", i)
	}
	requireCounts(t, store, "after the moves and the changes")
}

// TestKeyedStandInInTheHistoryTakesEdges: a workflow whose keyed job
// stands for an archived one (same key) gets its edges to that job, and
// the dependent runs since that job completed.
func TestKeyedStandInInTheHistoryTakesEdges(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	_, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "k", MaxRetries: &zero, IdempotencyKey: "nightly-1"})
	require.NoError(t, err)
	old := finishAll(t, store, "k", domain.OutcomeSucceeded)
	require.Equal(t, 1, archiveAll(t, store))
	a, err := uuid.NewV7()
	require.NoError(t, err)
	res, err := store.Enqueue(ctx, jobs.EnqueueParams{ID: a, Type: "t", Queue: "k", IdempotencyKey: "nightly-1"},
		jobs.EnqueueParams{Type: "t", Queue: "k2", DependsOn: []uuid.UUID{a}})
	require.NoError(t, err)
	require.False(t, res[0].Inserted)
	require.Equal(t, old[0], res[0].Job.ID)
	require.True(t, res[1].Inserted)
	require.Equal(t, jobs.StateQueued, res[1].Job.Status, "its dependency completed")
	require.Equal(t, "live", whereIs(t, store, old[0]))
}

// TestEnqueueTxNeedsATransactionForKeys: keyed jobs through a pool are
// refused with a clear error rather than inserted where a duplicate could
// be claimed before the history check removes it.
func TestEnqueueTxNeedsATransactionForKeys(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	_, err := db.EnqueueTx(context.Background(), store.Pool(), jobs.EnqueueParams{Type: "t", IdempotencyKey: "k"})
	require.ErrorContains(t, err, "need a transaction")
	_, err = db.EnqueueTx(context.Background(), store.Pool(), jobs.EnqueueParams{Type: "t"})
	require.NoError(t, err)
}
