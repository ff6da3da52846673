package db

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"flint/jobs"
)

// The history of finished jobs (see the job_history migration): a job
// finished for longer than the history_after_minutes setting moves out of
// jobs into a partition of job_history for its final state and the day it
// finished; retention drops whole partitions. Readers look in jobs, then
// in job_history; an operation that changes a finished job moves it back
// first (unarchive), in the transaction that changes it.

// historyStates are the final states, each a list partition of
// job_history subdivided by day.
var historyStates = []jobs.State{jobs.StateCompleted, jobs.StateCancelled, jobs.StateDeadLetter}

// historyPartition names the partition of one state and UTC day.
func historyPartition(state jobs.State, day time.Time) string {
	return "job_history_" + string(state) + "_" + day.UTC().Format("20060102")
}

// archiveCandidates is the condition on jobs rows (alias j) that may move
// to the history, for state $1, finished before $3 (ids below $2, the
// UUIDv7 floor of $3, so that the scan stays among old rows). A job that
// was touched since (a replay moved it back a moment ago) waits for the
// next turn; a job with dependencies either way stays: the workflow
// statements (release, cascade, re-arm on replay) work on jobs alone.
const archiveCandidates = `
	j.status = $1 AND j.status <> 'running' AND j.deleted_at IS NULL
	AND j.id < $2 AND j.finished_at < $3 AND j.updated_at < $3
	AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.job_id = j.id)
	AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.depends_on_id = j.id)`

// archiveDaysSQL returns the days the next batch of candidates finished
// on, so that their partitions exist before the move.
const archiveDaysSQL = `
SELECT DISTINCT (finished_at AT TIME ZONE 'UTC')::date FROM (
	SELECT j.finished_at FROM jobs j WHERE ` + archiveCandidates + `
	ORDER BY j.id LIMIT $4) c`

// archiveSQL moves up to $5 candidates that finished on one of the days
// $4 into job_history, their runs and log lines with them (the jobs
// delete cascades to job_executions and job_logs). job_counts keeps
// counting them (the jobs delete trigger subtracts them; the recount adds
// them back), and job_history_counts learns what each day partition holds.
// Rows another archiver holds are skipped.
const archiveSQL = `
WITH picked AS MATERIALIZED (
	SELECT j.id FROM jobs j WHERE ` + archiveCandidates + `
	  AND (j.finished_at AT TIME ZONE 'UTC')::date = ANY($4::date[])
	ORDER BY j.id
	LIMIT $5
	FOR UPDATE SKIP LOCKED
),
moved AS (
	DELETE FROM jobs j USING picked WHERE j.id = picked.id
	RETURNING j.*
),
stored AS (
	INSERT INTO job_history (` + jobColumns + `, execution_rows, log_rows)
	SELECT ` + jobColumns + `,
		coalesce((SELECT jsonb_agg(to_jsonb(e) - 'job_id' ORDER BY e.seq) FROM job_executions e WHERE e.job_id = m.id), '[]'),
		coalesce((SELECT jsonb_agg(to_jsonb(l) - 'job_id' ORDER BY l.seq) FROM job_logs l WHERE l.job_id = m.id), '[]')
	FROM moved m
),
recounted AS (
	INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
	SELECT queue, type, status, false, pg_backend_pid() % 16, count(*) FROM moved
	GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
	ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n
),
dayed AS (
	INSERT INTO job_history_counts (status, day, queue, type, n)
	SELECT status, (finished_at AT TIME ZONE 'UTC')::date, queue, type, count(*) FROM moved
	GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
	ON CONFLICT (status, day, queue, type) DO UPDATE SET n = job_history_counts.n + excluded.n
),
keyed AS (
	INSERT INTO job_history_keys (idempotency_key, job_id, status, day)
	SELECT idempotency_key, id, status, (finished_at AT TIME ZONE 'UTC')::date FROM moved
	WHERE idempotency_key IS NOT NULL
)
SELECT count(*) FROM moved`

// executionRecord and logRecord read the JSON arrays of a history row
// back as job_executions and job_logs rows (with jsonb_to_recordset).
const (
	executionRecord = `x(seq integer, attempt integer, worker_id text, started_at timestamptz, finished_at timestamptz,
		outcome text, error text, duration_ms bigint)`
	logRecord = `x(seq bigint, attempt integer, at timestamptz, level text, message text, attrs jsonb)`
)

// unarchiveSQL moves history rows (ids $1, finished no earlier than $2:
// see historyFloor) back into jobs, with their runs and log lines,
// undoing what archiveSQL did to the counts and the keys.
const unarchiveSQL = `
WITH moved AS (
	DELETE FROM job_history WHERE id = ANY($1::uuid[]) AND finished_at >= $2
	RETURNING *
),
unkeyed AS (
	DELETE FROM job_history_keys k USING moved m WHERE k.idempotency_key = m.idempotency_key
),
back AS (
	INSERT INTO jobs (` + jobColumns + `) SELECT ` + jobColumns + ` FROM moved
),
runs AS (
	INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
	SELECT m.id, x.seq, x.attempt, x.worker_id, x.started_at, x.finished_at, x.outcome, x.error, x.duration_ms
	FROM moved m, jsonb_to_recordset(m.execution_rows) AS ` + executionRecord + `
),
logged AS (
	INSERT INTO job_logs (job_id, seq, attempt, at, level, message, attrs) OVERRIDING SYSTEM VALUE
	SELECT m.id, x.seq, x.attempt, x.at, x.level, x.message, x.attrs
	FROM moved m, jsonb_to_recordset(m.log_rows) AS ` + logRecord + `
),
uncounted AS (
	INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
	SELECT queue, type, status, false, pg_backend_pid() % 16, -count(*) FROM moved
	GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
	ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n
),
undayed AS (
	UPDATE job_history_counts c SET n = c.n - g.n
	FROM (SELECT status, (finished_at AT TIME ZONE 'UTC')::date AS day, queue, type, count(*) AS n
	      FROM moved GROUP BY 1, 2, 3, 4) g
	WHERE c.status = g.status AND c.day = g.day AND c.queue = g.queue AND c.type = g.type
)
SELECT id FROM moved`

// holdLiveSQL locks the given jobs that are in jobs. A job the archiver
// is moving right now is locked by it: this waits for the move to commit
// and then finds the row gone, so that the next statement, with a newer
// snapshot, finds the job in the history.
const holdLiveSQL = `SELECT count(*) FROM (SELECT 1 FROM jobs WHERE id = ANY($1::uuid[]) FOR KEY SHARE) x`

// unarchive moves the given jobs back from the history into jobs, where
// the statements that change jobs find them. Ids not in the history are
// ignored. Run it in the transaction of the change, so that the archiver
// cannot take them again in between: those in jobs are held (holdLiveSQL),
// which also waits out a move under way.
func unarchive(ctx context.Context, q DBTX, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	var live int
	if err := q.QueryRow(ctx, holdLiveSQL, uuidArray(ids)).Scan(&live); err != nil {
		return fmt.Errorf("bring back from the history: %w", err)
	}
	if live == len(ids) {
		return nil // all of them are in jobs (a repeated id only costs the statement below)
	}
	if _, err := q.Exec(ctx, unarchiveSQL, uuidArray(ids), historyFloor(ids...)); err != nil {
		return fmt.Errorf("bring back from the history: %w", err)
	}
	return nil
}

// archivedDeadSQL picks dead-letter jobs in the history: the given ones,
// or the oldest when $1 is NULL.
const archivedDeadSQL = `
SELECT id FROM job_history
WHERE status = 'dead_letter' AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[]))
ORDER BY id LIMIT $2`

// unarchiveDead moves up to limit dead-letter jobs (the given ones, or
// any when ids is nil) back from the history, for a replay.
func unarchiveDead(ctx context.Context, q DBTX, ids []uuid.UUID, limit int) error {
	rows, err := q.Query(ctx, archivedDeadSQL, nullableIDs(ids), limit)
	if err != nil {
		return fmt.Errorf("find dead-letter jobs in the history: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return fmt.Errorf("find dead-letter jobs in the history: %w", err)
	}
	return unarchive(ctx, q, found)
}

// nullableIDs is ids as a uuid[] parameter, NULL for nil.
func nullableIDs(ids []uuid.UUID) any {
	if ids == nil {
		return nil
	}
	return uuidArray(ids)
}

// Archive moves up to limit jobs per final state that finished more than
// after ago into the history, creating the day partitions they need, and
// returns how many moved. Any number of processes may archive at once.
func (s *Store) Archive(ctx context.Context, after time.Duration, limit int) (int, error) {
	now, err := s.DatabaseNow(ctx)
	if err != nil {
		return 0, fmt.Errorf("archive: %w", err)
	}
	cutoff := now.Add(-after)
	total := 0
	for _, state := range historyStates {
		args := []any{string(state), uuidV7Floor(cutoff), cutoff}
		rows, err := s.pool.Query(ctx, archiveDaysSQL, append(args, limit)...)
		if err != nil {
			return total, fmt.Errorf("archive %s jobs: %w", state, err)
		}
		days, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return total, fmt.Errorf("archive %s jobs: %w", state, err)
		}
		if len(days) == 0 {
			continue
		}
		var n int
		for try := 1; ; try++ {
			if err := s.ensureHistoryPartitions(ctx, state, days); err != nil {
				return total, err
			}
			err := s.pool.QueryRow(ctx, archiveSQL, append(args, days, limit)...).Scan(&n)
			var pgErr *pgconn.PgError
			if try == 1 && errors.As(err, &pgErr) && pgErr.Code == "23514" { // check_violation
				// No partition for a row: another process's retention
				// dropped a day this one thought existed.
				for _, d := range days {
					s.historyParts.Delete(historyPartition(state, d))
				}
				continue
			}
			if err != nil {
				return total, fmt.Errorf("archive %s jobs: %w", state, err)
			}
			break
		}
		total += n
	}
	return total, nil
}

// historyDDLLock is the advisory lock that makes one process at a time
// create or drop history partitions.
const historyDDLLock = `SELECT pg_advisory_xact_lock(7146522309)`

// historyLockTimeout bounds how long partition DDL waits for the lock on
// its parent: a long transaction that read the history must not stall the
// readers queued behind the DDL. It tries again on its next turn.
const historyLockTimeout = `SET LOCAL lock_timeout = '2s'`

// ensureHistoryPartitions creates the day partitions of state for days
// that do not exist yet.
func (s *Store) ensureHistoryPartitions(ctx context.Context, state jobs.State, days []time.Time) error {
	var missing []time.Time
	for _, d := range days {
		if _, ok := s.historyParts.Load(historyPartition(state, d)); !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, historyDDLLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, historyLockTimeout); err != nil {
			return err
		}
		for _, d := range missing {
			from := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
			ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
				pgx.Identifier{historyPartition(state, from)}.Sanitize(),
				pgx.Identifier{"job_history_" + string(state)}.Sanitize(),
				from.Format(time.RFC3339), from.AddDate(0, 0, 1).Format(time.RFC3339))
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create history partitions of %s jobs: %w", state, err)
	}
	for _, d := range missing {
		s.historyParts.Store(historyPartition(state, d), struct{}{})
	}
	return nil
}

// historyPartitionsSQL lists the day partitions of the history.
const historyPartitionsSQL = `
SELECT c.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname IN ('job_history_completed', 'job_history_cancelled', 'job_history_dead_letter')
ORDER BY c.relname`

// HistoryPartition is one day of one final state in the history.
type HistoryPartition struct {
	Name  string
	State jobs.State
	Day   time.Time
}

// HistoryPartitions lists the day partitions of the history, oldest first
// within each state.
func (s *Store) HistoryPartitions(ctx context.Context) ([]HistoryPartition, error) {
	rows, err := s.pool.Query(ctx, historyPartitionsSQL)
	if err != nil {
		return nil, fmt.Errorf("list history partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list history partitions: %w", err)
	}
	out := make([]HistoryPartition, 0, len(names))
	for _, name := range names {
		for _, st := range historyStates {
			rest, ok := strings.CutPrefix(name, "job_history_"+string(st)+"_")
			if !ok {
				continue
			}
			if day, err := time.Parse("20060102", rest); err == nil {
				out = append(out, HistoryPartition{Name: name, State: st, Day: day})
			}
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].State != out[k].State {
			return out[i].State < out[k].State
		}
		return out[i].Day.Before(out[k].Day)
	})
	return out, nil
}

// dropHistoryKeysSQL frees the idempotency keys of a day partition's jobs
// as it goes.
const dropHistoryKeysSQL = `DELETE FROM job_history_keys WHERE status = $1 AND day = $2`

// dropHistoryCountsSQL takes a day partition's jobs out of job_counts as
// it goes.
const dropHistoryCountsSQL = `
WITH gone AS (
	DELETE FROM job_history_counts WHERE status = $1 AND day = $2
	RETURNING status, queue, type, n
)
INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
SELECT queue, type, status, false, 0, -sum(n) FROM gone
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n`

// errDroppedAlready: another process dropped the partition first.
var errDroppedAlready = errors.New("history partition dropped already")

// DropExpiredHistory drops the day partitions whose every job is past its
// state's retention at now (nil: the database clock): a day goes once its
// end is older than the retention. It returns the partitions dropped. A
// partition whose lock is not granted within two seconds (a long
// transaction read it) is left for the next turn.
func (s *Store) DropExpiredHistory(ctx context.Context, st jobs.Settings, now *time.Time) ([]string, error) {
	var at time.Time
	var err error
	if now != nil {
		at = *now
	} else if at, err = s.DatabaseNow(ctx); err != nil {
		return nil, fmt.Errorf("drop history: %w", err)
	}
	keep := map[jobs.State]int{
		jobs.StateCompleted:  st.RetentionCompletedDays,
		jobs.StateCancelled:  st.RetentionCancelledDays,
		jobs.StateDeadLetter: st.RetentionDeadDays,
	}
	parts, err := s.HistoryPartitions(ctx)
	if err != nil {
		return nil, err
	}
	var dropped []string
	var errs []error
	for _, p := range parts {
		days := keep[p.State]
		if days <= 0 || p.Day.AddDate(0, 0, 1).After(at.Add(-time.Duration(days)*24*time.Hour)) {
			continue
		}
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, historyDDLLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, historyLockTimeout); err != nil {
				return err
			}
			// The partition's lock first: a move into this day that
			// committed after the counts and keys below were read would
			// otherwise leave them counting rows the drop removes.
			if _, err := tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{p.Name}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
					return errDroppedAlready
				}
				return err
			}
			if _, err := tx.Exec(ctx, dropHistoryCountsSQL, string(p.State), p.Day); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, dropHistoryKeysSQL, string(p.State), p.Day); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{p.Name}.Sanitize())
			return err
		})
		if errors.Is(err, errDroppedAlready) {
			s.historyParts.Delete(p.Name)
			continue // another process dropped it first
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("drop history partition %s: %w", p.Name, err))
			continue
		}
		s.historyParts.Delete(p.Name)
		dropped = append(dropped, p.Name)
	}
	return dropped, errors.Join(errs...)
}

// historyFloor is the earliest time any of the jobs with these ids can
// have finished, for the history's by-id lookups: a job finishes after it
// was created, and a UUIDv7 id carries its creation time, so the day
// partitions before it need not be searched. A day of slack covers the
// enqueuer's clock running ahead of the database's; an id that is not a
// UUIDv7, or whose time lies in the future, bounds nothing.
func historyFloor(ids ...uuid.UUID) time.Time {
	var floor time.Time
	limit := time.Now().Add(time.Hour)
	for i, id := range ids {
		if id.Version() != 7 {
			return time.Time{}
		}
		sec, nsec := id.Time().UnixTime()
		t := time.Unix(sec, nsec)
		if t.After(limit) {
			return time.Time{}
		}
		if i == 0 || t.Before(floor) {
			floor = t
		}
	}
	if floor.IsZero() {
		return floor
	}
	return floor.Add(-24 * time.Hour)
}
