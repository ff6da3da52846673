package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

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
	if err := q.QueryRow(ctx, holdLiveSQL, ids).Scan(&live); err != nil {
		return fmt.Errorf("bring back from the history: %w", err)
	}
	if live == len(ids) {
		return nil // all of them are in jobs (a repeated id only costs the statement below)
	}
	if _, err := q.Exec(ctx, unarchiveSQL, ids, historyFloor(ids...)); err != nil {
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
	return ids
}
