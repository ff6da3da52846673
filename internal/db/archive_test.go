package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// whereIs reports whether a job is in jobs ("live"), in the history
// ("history"), in both (a bug) or nowhere ("").
func whereIs(t *testing.T, store *db.Store, id uuid.UUID) string {
	t.Helper()
	var live, hist int
	require.NoError(t, store.Pool().QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM jobs WHERE id = $1), (SELECT count(*) FROM job_history WHERE id = $1)`, id).Scan(&live, &hist))
	switch {
	case live == 1 && hist == 0:
		return "live"
	case live == 0 && hist == 1:
		return "history"
	case live == 0 && hist == 0:
		return ""
	default:
		return fmt.Sprintf("live %d, history %d", live, hist)
	}
}

// archiveAll moves every finished job that may move, now.
func archiveAll(t *testing.T, store *db.Store) int {
	t.Helper()
	total := 0
	for {
		n, err := store.Archive(context.Background(), 0, 1000)
		require.NoError(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

// jobView is what a reader sees of a job: the row, its runs and its log.
type jobView struct {
	Job  *jobs.Job
	Runs []domain.Execution
	Log  []domain.LogEntry
}

func viewOf(t *testing.T, store *db.Store, id uuid.UUID) jobView {
	t.Helper()
	ctx := context.Background()
	j, err := store.GetJob(ctx, id)
	require.NoError(t, err)
	runs, err := store.ListExecutions(ctx, j)
	require.NoError(t, err)
	log, err := store.JobLogs(ctx, id, 0, 100)
	require.NoError(t, err)
	return jobView{Job: j, Runs: runs, Log: log}
}

// archiveLists are the lists TestArchiveMovesFinishedJobsWhole reads
// before and after the move: by state, type, queue and search.
var archiveLists = map[string]domain.ListParams{
	"completed": {Statuses: []jobs.State{jobs.StateCompleted}},
	"dead":      {Statuses: []jobs.State{jobs.StateDeadLetter}},
	"all":       {},
	"type t1":   {Type: "t1"},
	"queue b":   {Queue: "b"},
	"search":    {Q: "key-b"},
	"live only": {Statuses: []jobs.State{jobs.StateQueued}},
}

// TestArchiveMovesFinishedJobsWhole: finished jobs move to the history with
// their runs and log lines; every reader (by id, runs, log, lists by state,
// type, queue and search, counts) sees the same as before the move; what
// must stay (live jobs, the bin, workflow jobs) stays.
func TestArchiveMovesFinishedJobsWhole(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero, one := 0, 1

	var batch []jobs.EnqueueParams
	for i := range 30 {
		batch = append(batch, jobs.EnqueueParams{Type: fmt.Sprintf("t%d", i%3), Queue: "a", MaxRetries: &zero,
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
	}
	_, err := store.Enqueue(ctx, batch...)
	require.NoError(t, err)
	done := finishAll(t, store, "a", domain.OutcomeSucceeded)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "b", MaxRetries: &one, IdempotencyKey: "key-b"})
	require.NoError(t, err)
	finishAll(t, store, "b", domain.OutcomeFailed) // one retry left: scheduled again
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() WHERE status = 'scheduled'`)
	require.NoError(t, err)
	_, err = store.PromoteDue(ctx, nil, 10)
	require.NoError(t, err)
	dead := finishAll(t, store, "b", domain.OutcomeFailed)
	require.Len(t, dead, 1)
	require.NoError(t, store.InsertJobLogs(ctx, []domain.LogEntry{
		{JobID: dead[0], Attempt: 2, At: time.Now(), Level: "error", Message: "it broke <b>", Attrs: map[string]any{"k": "v"}},
		{JobID: done[0], Attempt: 1, At: time.Now(), Level: "info", Message: "all good"},
	}))

	// What stays: a queued job, a binned finished job, a workflow.
	waiting, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "c"})
	require.NoError(t, err)
	_, err = store.DeleteJob(ctx, done[1])
	require.NoError(t, err)
	parent, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "p", Queue: "w", MaxRetries: &zero})
	require.NoError(t, err)
	child, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "c", Queue: "w", DependsOn: []uuid.UUID{parent[0].Job.ID}})
	require.NoError(t, err)
	finishAll(t, store, "w", domain.OutcomeSucceeded)
	spawner, kid := spawnOne(t, store)
	finishAll(t, store, "kids", domain.OutcomeSucceeded)

	before := map[uuid.UUID]jobView{}
	for _, id := range append(slices.Clone(done), dead[0]) {
		before[id] = viewOf(t, store, id)
	}
	listBefore := map[string][]uuid.UUID{}
	for name, p := range archiveLists {
		listBefore[name] = listIDs(t, store, p)
	}
	requireCounts(t, store, "before the move")

	moved := archiveAll(t, store)
	require.Equal(t, 29+1, moved, "every finished job but the binned one and the workflow's")
	require.Equal(t, "history", whereIs(t, store, done[0]))
	require.Equal(t, "history", whereIs(t, store, dead[0]))
	require.Equal(t, "live", whereIs(t, store, done[1]), "the bin stays in jobs")
	require.Equal(t, "live", whereIs(t, store, waiting[0].Job.ID))
	require.Equal(t, "live", whereIs(t, store, parent[0].Job.ID), "workflow jobs stay in jobs")
	require.Equal(t, "live", whereIs(t, store, child[0].Job.ID))
	require.Equal(t, "live", whereIs(t, store, spawner), "a spawner stays while a job it spawned reads it")
	require.Equal(t, "live", whereIs(t, store, kid))
	var left int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM job_executions WHERE job_id = $1`, done[0]).Scan(&left))
	require.Zero(t, left, "runs leave with their job")

	for id, v := range before {
		require.Equal(t, v, viewOf(t, store, id), "job %s reads the same from the history", id)
	}
	for name, p := range archiveLists {
		require.Equal(t, listBefore[name], listIDs(t, store, p), "list %s", name)
	}
	requireCounts(t, store, "after the move")

	// A second pass finds nothing; nothing is in both places.
	require.Zero(t, archiveAll(t, store))
	var both int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs j JOIN job_history h USING (id)`).Scan(&both))
	require.Zero(t, both)
}

// queryIDs returns the ids a query selects, in its order.
func queryIDs(t *testing.T, store *db.Store, sql string, args ...any) []uuid.UUID {
	t.Helper()
	rows, err := store.Pool().Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	if len(out) == 0 {
		return nil // as listIDs has it
	}
	return out
}

// listIDs pages through a whole listing, 7 at a time (so pages cross the
// border between jobs and the history), and returns the ids in order.
func listIDs(t *testing.T, store *db.Store, p domain.ListParams) []uuid.UUID {
	t.Helper()
	p.Limit = 7
	var out []uuid.UUID
	for {
		page, err := store.ListJobs(context.Background(), p)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			out = append(out, j.ID)
		}
		if page.NextCursor == "" {
			return out
		}
		p.Cursor = page.NextCursor
	}
}

// TestConcurrentArchiversMoveEachJobOnce: archivers running at once while
// jobs finish move every job exactly once and keep the counts.
func TestConcurrentArchiversMoveEachJobOnce(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	zero := 0
	params := make([]jobs.EnqueueParams, 3000)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: fmt.Sprintf("t%d", i%3), Queue: "q", MaxRetries: &zero}
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := store.Archive(ctx, 0, 100)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				select {
				case <-stop:
					if n == 0 {
						return
					}
				default:
				}
			}
		}()
	}
	finishConcurrently(t, store, 3, 50)
	close(stop)
	wg.Wait()
	total += archiveAll(t, store)
	require.Equal(t, 3000, total)
	var live, hist, distinct int
	require.NoError(t, store.Pool().QueryRow(ctx,
		`SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM job_history), (SELECT count(DISTINCT id) FROM job_history)`).
		Scan(&live, &hist, &distinct))
	require.Zero(t, live)
	require.Equal(t, 3000, hist)
	require.Equal(t, 3000, distinct)
	requireCounts(t, store, "after concurrent archivers")
}

// TestHistoryHasEveryJobsColumn: a history row is a jobs row; a migration
// that adds a column to jobs must add it to job_history too, in the same
// place.
func TestHistoryHasEveryJobsColumn(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	columns := func(table string) []string {
		rows, err := store.Pool().Query(context.Background(), `
			SELECT column_name || ' ' || data_type FROM information_schema.columns
			WHERE table_name = $1 ORDER BY ordinal_position`, table)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c string
			require.NoError(t, rows.Scan(&c))
			out = append(out, c)
		}
		return out
	}
	// Every statement names its columns, so the order may differ (a
	// column added later to both tables comes after the history's own).
	live, hist := columns("jobs"), columns("job_history")
	require.ElementsMatch(t, append(live, "execution_rows jsonb", "log_rows jsonb"), hist)
}

// spawnOne completes a job of queue "spawns" that spawns one job, in queue
// "kids", depending on it ($self), and returns both ids.
func spawnOne(t *testing.T, store *db.Store) (spawner, kid uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "p", Queue: "spawns"})
	require.NoError(t, err)
	got, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"spawns"}, Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	spawn := []jobs.Spawned{{Key: "kid", DependsOn: []string{jobs.Self}, Params: jobs.EnqueueParams{Type: "c", Queue: "kids"}}}
	moved, _, err := store.FinishJobs(ctx, []domain.Finish{{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSucceeded, Spawn: spawn}})
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, moved[0].Status)
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT job_id FROM workflow_steps WHERE spawned_by = $1`, got[0].ID).Scan(&kid))
	return got[0].ID, kid
}
