package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flinthq/flint/jobs"
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
// statements (release, cascade, re-arm on replay) work on jobs alone, and
// the claims of its dependents read its result (parentsSQL). So does a
// member of a batch until the batch has settled and its callbacks have
// finished (they read the members' results), and the batch page counts
// its unfinished members in jobs. A durable job stays too, with its
// recorded steps and signals (job_steps, job_signals), which a replay
// that keeps them reads.
const archiveCandidates = `
	j.status = $1 AND j.status <> 'running' AND j.deleted_at IS NULL AND NOT j.durable
	AND j.id < $2 AND j.finished_at < $3 AND j.updated_at < $3
	AND NOT EXISTS ` + parentIDsSQL + `
	AND NOT EXISTS ` + childIDsSQL + `
	AND (j.batch_id IS NULL OR EXISTS (
		SELECT 1 FROM batches b WHERE b.id = j.batch_id AND b.settled_at IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM batch_callbacks c JOIN jobs cj ON cj.id = c.job_id
		                WHERE c.batch_id = b.id AND cj.status NOT IN ('completed', 'dead_letter', 'cancelled'))))`

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
