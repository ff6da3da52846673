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

	"flint/db"
	"flint/db/dbtest"
	"flint/jobs"
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
	Runs []jobs.Execution
	Log  []jobs.LogEntry
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
	done := finishAll(t, store, "a", jobs.OutcomeSucceeded)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "b", MaxRetries: &one, IdempotencyKey: "key-b"})
	require.NoError(t, err)
	finishAll(t, store, "b", jobs.OutcomeFailed) // one retry left: scheduled again
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() WHERE status = 'scheduled'`)
	require.NoError(t, err)
	_, err = store.PromoteDue(ctx, nil, 10)
	require.NoError(t, err)
	dead := finishAll(t, store, "b", jobs.OutcomeFailed)
	require.Len(t, dead, 1)
	require.NoError(t, store.InsertJobLogs(ctx, []jobs.LogEntry{
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
	finishAll(t, store, "w", jobs.OutcomeSucceeded)

	before := map[uuid.UUID]jobView{}
	for _, id := range append(slices.Clone(done), dead[0]) {
		before[id] = viewOf(t, store, id)
	}
	listBefore := map[string][]uuid.UUID{}
	lists := map[string]jobs.ListParams{
		"completed": {Statuses: []jobs.State{jobs.StateCompleted}},
		"dead":      {Statuses: []jobs.State{jobs.StateDeadLetter}},
		"all":       {},
		"type t1":   {Type: "t1"},
		"queue b":   {Queue: "b"},
		"search":    {Q: "key-b"},
		"live only": {Statuses: []jobs.State{jobs.StateQueued}},
	}
	for name, p := range lists {
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
	var left int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM job_executions WHERE job_id = $1`, done[0]).Scan(&left))
	require.Zero(t, left, "runs leave with their job")

	for id, v := range before {
		require.Equal(t, v, viewOf(t, store, id), "job %s reads the same from the history", id)
	}
	for name, p := range lists {
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
func listIDs(t *testing.T, store *db.Store, p jobs.ListParams) []uuid.UUID {
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
	dead := finishAll(t, store, "d", jobs.OutcomeFailed)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", MaxRetries: &zero, IdempotencyKey: "done-1"},
		jobs.EnqueueParams{Type: "t", Queue: "ok", MaxRetries: &zero})
	require.NoError(t, err)
	done := finishAll(t, store, "ok", jobs.OutcomeSucceeded)
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
	old, j, err := store.EditAndReplay(ctx, dead[1], json.RawMessage(`{"fixed":true}`), jobs.AuditEntry{Actor: "t", Source: "api"})
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

	// Keys of archived jobs are still taken: the same key returns the
	// archived job, single and in a batch, and inserts nothing.
	again, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", IdempotencyKey: "done-1"})
	require.NoError(t, err)
	require.False(t, again[0].Inserted)
	require.Equal(t, done[0], again[0].Job.ID)
	require.Equal(t, jobs.StateCompleted, again[0].Job.Status)
	mixed, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t", Queue: "ok", IdempotencyKey: "done-1"},
		jobs.EnqueueParams{Type: "t", Queue: "ok", IdempotencyKey: "fresh"})
	require.NoError(t, err)
	require.False(t, mixed[0].Inserted)
	require.Equal(t, done[0], mixed[0].Job.ID)
	require.True(t, mixed[1].Inserted)
	var holders int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE idempotency_key = 'done-1'`).Scan(&holders))
	require.Zero(t, holders, "no second job holds the key")

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
	var te *jobs.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, jobs.StateCompleted, te.From)
}

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
	ids := finishAll(t, store, "r", jobs.OutcomeSucceeded)
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

	st := jobs.DefaultSettings()
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

	// A job that finished days after it was created is found by id.
	old, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "t0", Queue: "late", MaxRetries: &zero})
	require.NoError(t, err)
	finishAll(t, store, "late", jobs.OutcomeSucceeded)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET finished_at = now() + interval '3 days' WHERE id = $1`, old[0].Job.ID)
	require.NoError(t, err)
	_, err = store.Archive(ctx, -4*24*time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, "history", whereIs(t, store, old[0].Job.ID))
	got, err := store.GetJob(ctx, old[0].Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, got.Status)
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
	live, hist := columns("jobs"), columns("job_history")
	require.Equal(t, live, hist[:len(live)])
	require.Equal(t, []string{"execution_rows jsonb", "log_rows jsonb"}, hist[len(live):])
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
		return finishAll(t, store, "x", jobs.OutcomeSucceeded)[0]
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
	claimed, err := store.ClaimJobs(ctx, jobs.ClaimParams{WorkerID: "w", Queues: []string{"s"}, Limit: 24, LeaseTTL: time.Minute})
	require.NoError(t, err)
	errs := []string{"dial tcp 10.0.0.1:443: connection refused", "context deadline exceeded (timeout)", "quota at 100% for today"}
	fin := make([]jobs.Finish, len(claimed))
	for i, j := range claimed {
		fin[i] = jobs.Finish{Lease: jobs.LeaseOf(j), Outcome: jobs.OutcomeFailed, Error: errs[i%3]}
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
		got := listIDs(t, store, jobs.ListParams{Q: q})
		require.Equal(t, want, got, "search %q", q)
	}
	require.Len(t, listIDs(t, store, jobs.ListParams{Q: "report"}), 16)
	require.Len(t, listIDs(t, store, jobs.ListParams{Q: "100%"}), 8)
	require.Empty(t, listIDs(t, store, jobs.ListParams{Q: "order"}), "a key matches whole")
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
	claimed, err := store.ClaimJobs(ctx, jobs.ClaimParams{WorkerID: "w", Queues: []string{"d"}, Limit: 40, LeaseTTL: time.Minute})
	require.NoError(t, err)
	fin := make([]jobs.Finish, len(claimed))
	for i, j := range claimed {
		fin[i] = jobs.Finish{Lease: jobs.LeaseOf(j), Outcome: jobs.OutcomeFailed, Error: []string{"a needle here", "nothing", "NEEDLE again"}[i%3]}
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
		require.Equal(t, want, listIDs(t, store, jobs.ListParams{Q: q}), "search %q", q)
		p := jobs.ListParams{Q: q, Statuses: []jobs.State{jobs.StateDeadLetter}, Type: "report.build"}
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
	dead := finishAll(t, store, "m", jobs.OutcomeFailed)
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
	old := finishAll(t, store, "k", jobs.OutcomeSucceeded)
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
