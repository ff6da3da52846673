package db

import (
	"context"
	"fmt"
	"time"

	"flint/jobs"
)

// reapSQL returns jobs whose lease expired to the queue. A worker that stops
// heartbeating has crashed, hung or lost its connection: that is an
// infrastructure failure, so the attempt is refunded and the run recorded as
// interrupted. Interruptions are counted apart; the one that reaches the
// limit parks the job in the DLQ, so a job that kills its worker every time
// (a poison pill) cannot crash workers forever. A job whose cancellation was
// requested is cancelled instead. Rows are taken with SKIP LOCKED in id
// order, so any number of reapers can run at once.
const reapSQL = `
WITH expired AS MATERIALIZED (
	SELECT id AS expired_id FROM jobs
	WHERE status = 'running' AND lease_expires_at < coalesce($1::timestamptz, now())
	ORDER BY id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
),
moved AS (
	UPDATE jobs j SET
		status = CASE
			WHEN j.cancel_requested THEN 'cancelled'
			WHEN j.interruptions + 1 >= $3 THEN 'dead_letter'
			ELSE 'queued' END,
		attempt = j.attempt - 1,
		interruptions = j.interruptions + 1,
		last_error = CASE
			WHEN j.interruptions + 1 >= $3 AND NOT j.cancel_requested
			THEN format('interrupted %s times: its worker died or stopped heartbeating each time (suspected poison pill)', j.interruptions + 1)
			ELSE format('interrupted: worker %s stopped heartbeating; lease expired at %s', j.worker_id, j.lease_expires_at)
			END,
		finished_at = CASE WHEN j.cancel_requested OR j.interruptions + 1 >= $3 THEN now() ELSE NULL END,
		lease_token = NULL,
		lease_expires_at = NULL,
		updated_at = now()
	FROM expired
	WHERE j.id = expired.expired_id
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.executions, j.worker_id, j.started_at, j.last_error
),
recorded AS (
	INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
	SELECT id, executions, attempt + 1, coalesce(worker_id, ''), coalesce(started_at, now()), now(),
	       'interrupted', last_error, greatest(0, (extract(epoch FROM now() - started_at) * 1000)::bigint)
	FROM moved
),
counted AS (
	INSERT INTO job_throughput (bucket, outcome, n)
	SELECT date_trunc('minute', now()), 'interrupted', count(*) FROM moved HAVING count(*) > 0
	ON CONFLICT (bucket, outcome) DO UPDATE SET n = job_throughput.n + excluded.n
),
notified AS (
	SELECT count(pg_notify('` + ChannelJobs + `', q.queue)) AS n
	FROM (SELECT DISTINCT queue FROM moved WHERE status = 'queued') q
)
SELECT moved.id, moved.status, moved.type, moved.queue, moved.attempt FROM moved, notified`

// ReapExpired requeues up to limit running jobs whose lease expired before
// now (nil: the database clock).
func (s *Store) ReapExpired(ctx context.Context, now *time.Time, limit int) ([]jobs.Moved, error) {
	out, err := collectMoved(s.pool.Query(ctx, reapSQL, now, limit, s.maxInterruptions))
	if err != nil {
		return nil, fmt.Errorf("reap expired leases: %w", err)
	}
	return out, nil
}

// promoteSQL moves scheduled jobs whose run_at has come to queued and wakes
// the workers of their queues.
const promoteSQL = `
WITH due AS MATERIALIZED (
	SELECT id AS due_id FROM jobs
	WHERE status = 'scheduled' AND deleted_at IS NULL AND run_at <= coalesce($1::timestamptz, now())
	ORDER BY run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
),
moved AS (
	UPDATE jobs j SET status = 'queued', updated_at = now()
	FROM due
	WHERE j.id = due.due_id
	RETURNING j.id, j.status, j.type, j.queue, j.attempt
),
notified AS (
	SELECT count(pg_notify('` + ChannelJobs + `', q.queue)) AS n FROM (SELECT DISTINCT queue FROM moved) q
)
SELECT moved.id, moved.status, moved.type, moved.queue, moved.attempt FROM moved, notified`

// PromoteDue moves up to limit scheduled jobs due by now (nil: the database
// clock) to queued.
func (s *Store) PromoteDue(ctx context.Context, now *time.Time, limit int) ([]jobs.Moved, error) {
	out, err := collectMoved(s.pool.Query(ctx, promoteSQL, now, limit))
	if err != nil {
		return nil, fmt.Errorf("promote due jobs: %w", err)
	}
	return out, nil
}

func collectMoved(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}, err error) ([]jobs.Moved, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []jobs.Moved
	for rows.Next() {
		var m jobs.Moved
		var status string
		if err := rows.Scan(&m.JobID, &status, &m.Type, &m.Queue, &m.Attempt); err != nil {
			return nil, err
		}
		m.Status = jobs.State(status)
		out = append(out, m)
	}
	return out, rows.Err()
}
