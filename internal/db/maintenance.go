package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
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
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.executions, j.worker_id, j.started_at, j.last_error,
	          j.effective_priority, j.run_at, j.created_at, j.batch_id
),
recorded AS (
	INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
	SELECT id, executions, attempt + 1, coalesce(worker_id, ''), coalesce(started_at, now()), now(),
	       'interrupted', last_error, greatest(0, (extract(epoch FROM now() - started_at) * 1000)::bigint)
	FROM moved
),
counted AS (
	INSERT INTO job_throughput (bucket, outcome, type, queue, shard, n)
	SELECT date_trunc('minute', now()), 'interrupted', type, queue, pg_backend_pid() % 16, count(*) FROM moved GROUP BY type, queue
	ON CONFLICT (bucket, outcome, type, queue, shard) DO UPDATE SET n = job_throughput.n + excluded.n
)
SELECT ` + movedColumns + ` FROM moved`

// ReapExpired requeues up to limit running jobs whose lease expired before
// now (nil: the database clock).
// Jobs that end dead_letter or cancelled take their downstream jobs with
// them (cascade), in the same transaction; those are returned too.
func (s *Store) ReapExpired(ctx context.Context, now *time.Time, limit int) ([]domain.Moved, error) {
	var out []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = collectMoved(tx.Query(ctx, reapSQL, now, limit, s.maxInterruptions))
		if err != nil {
			return err
		}
		var ended []uuid.UUID
		for _, m := range out {
			if m.Status == jobs.StateDeadLetter || m.Status == jobs.StateCancelled {
				ended = append(ended, m.JobID)
			}
		}
		more, err := cascade(ctx, tx, ended)
		out = append(out, more...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reap expired leases: %w", err)
	}
	s.publish(nil, out)
	return out, nil
}

// promoteMovedSQL follows a "due" CTE of locked scheduled ids: it queues
// them and returns what moved (the caller wakes their workers).
// A waiting job whose wait ends this way has slept its time, or timed out
// waiting for a signal or an event: the timeout is kept as what resumed
// the wait (job_signals), which its next claim carries. The job keeps
// its run_at (a promotion ahead of it leaves the time to the claim, see
// claimStatement); promoteDueMovedSQL makes it due now.
const promoteMovedSQL = `
timed AS (
	INSERT INTO job_signals (job_id, name, dedupe_id, kind)
	SELECT due_id, due_wait, 'timeout', 'timeout' FROM due WHERE due_kind IN ('signal', 'event')
	ON CONFLICT (job_id, name, dedupe_id) DO NOTHING
),
moved AS (
	UPDATE jobs j SET status = 'queued', wait_kind = NULL, wait_name = NULL, updated_at = now()
	FROM due
	WHERE j.id = due.due_id
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.effective_priority, j.run_at, j.created_at, j.batch_id
)
SELECT ` + movedColumns + ` FROM moved`

// promoteSQL moves scheduled jobs whose run_at has come to queued and wakes
// the workers of their queues.
var promoteSQL = `
WITH due AS MATERIALIZED (
	SELECT id AS due_id, wait_kind AS due_kind, wait_name AS due_wait FROM jobs
	WHERE status = 'scheduled' AND deleted_at IS NULL AND run_at <= coalesce($1::timestamptz, now())
	ORDER BY run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
),
` + promoteDueMovedSQL

// promoteDueMovedSQL is promoteMovedSQL for the sweep, whose clock ($1)
// may be given: what it promotes is due now (run_at at most now()), as a
// claim that starts its job at once requires.
var promoteDueMovedSQL = strings.Replace(promoteMovedSQL, "SET status = 'queued',", "SET status = 'queued', run_at = least(j.run_at, now()),", 1)

// wakeSQL is promoteSQL for waiting jobs whose wait has ended.
var wakeSQL = `
WITH due AS MATERIALIZED (
	SELECT id AS due_id, wait_kind AS due_kind, wait_name AS due_wait FROM jobs
	WHERE status = 'waiting' AND deleted_at IS NULL AND run_at <= coalesce($1::timestamptz, now())
	ORDER BY run_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
),
` + promoteDueMovedSQL

// PromoteDue moves up to limit scheduled jobs due by now (nil: the database
// clock) to queued.
// Waiting jobs whose wait has ended (a sleep's wake time, a wait's
// timeout) are queued too, within the same limit.
func (s *Store) PromoteDue(ctx context.Context, now *time.Time, limit int) ([]domain.Moved, error) {
	out, err := collectMoved(s.pool.Query(ctx, promoteSQL, now, limit))
	if err != nil {
		return nil, fmt.Errorf("promote due jobs: %w", err)
	}
	if len(out) < limit {
		woken, err := collectMoved(s.pool.Query(ctx, wakeSQL, now, limit-len(out)))
		if err != nil {
			return nil, fmt.Errorf("wake waiting jobs: %w", err)
		}
		out = append(out, woken...)
	}
	s.publish(nil, out)
	return out, nil
}

// movedColumns is what every statement that moves jobs returns, in the
// order collectMoved scans it, from a CTE named moved.
const movedColumns = `moved.id, moved.status, moved.type, moved.queue, moved.attempt, moved.effective_priority, moved.run_at, moved.created_at,
	moved.batch_id`

func collectMoved(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}, err error) ([]domain.Moved, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []domain.Moved
	for rows.Next() {
		var m domain.Moved
		var status string
		if err := rows.Scan(&m.JobID, &status, &m.Type, &m.Queue, &m.Attempt, &m.EffectivePriority, &m.RunAt, &m.CreatedAt, &m.BatchID); err != nil {
			return nil, err
		}
		m.Status = jobs.State(status)
		out = append(out, m)
	}
	return out, rows.Err()
}

// takeTurnSQL lets one process per interval run a cluster-wide pass: the
// row's timestamp moves only if the previous turn is at least interval old.
const takeTurnSQL = `
INSERT INTO loop_leases (name, last_run_at, holder) VALUES ($1, now(), $2)
ON CONFLICT (name) DO UPDATE SET last_run_at = now(), holder = excluded.holder
WHERE loop_leases.last_run_at <= now() - $3 * interval '1 millisecond'
RETURNING name`

// TakeTurn reports whether this process (holder) gets the turn of the named
// pass for the current interval. Of several processes asking within one
// interval, exactly one gets it.
func (s *Store) TakeTurn(ctx context.Context, name, holder string, interval time.Duration) (bool, error) {
	rows, err := s.pool.Query(ctx, takeTurnSQL, name, holder, float64(interval)/float64(time.Millisecond)*0.95)
	if err != nil {
		return false, fmt.Errorf("take turn %s: %w", name, err)
	}
	defer rows.Close()
	got := rows.Next()
	return got, rows.Err()
}

// ageSQL lowers the effective priority of medium and low jobs that have
// waited in the queue longer than their threshold (run_at is when they
// became due), down to the floor. The claim index orders by effective
// priority, so aged jobs move up at once.
const ageSQL = `
WITH aged AS (
	UPDATE jobs SET effective_priority = greatest($1::float8, effective_priority - $2::float8)
	WHERE id IN (
		SELECT id FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND effective_priority > $1::float8
		  AND ((priority = 2 AND run_at <= now() - $3 * interval '1 second')
		    OR (priority = 3 AND run_at <= now() - $4 * interval '1 second'))
		ORDER BY id
		LIMIT $5
		FOR UPDATE SKIP LOCKED)
	RETURNING id, status, type, queue, attempt, effective_priority, run_at, created_at, batch_id
)
SELECT id, status, type, queue, attempt, effective_priority, run_at, created_at, batch_id FROM aged`

// AgeQueued runs one aging step over up to limit waiting jobs and returns
// how many it aged.
//
// The jobs' new priorities go to the event sink as re-scores (not
// announced as events: the state did not change), which keeps the Redis
// ready queue's order in step.
func (s *Store) AgeQueued(ctx context.Context, st domain.Settings, limit int) (int, error) {
	aged, err := collectMoved(s.pool.Query(ctx, ageSQL, st.AgingFloor, st.AgingStep, st.AgingMediumAfterSeconds,
		st.AgingLowAfterSeconds, limit))
	if err != nil {
		return 0, fmt.Errorf("age queued jobs: %w", err)
	}
	if r, ok := s.events.(interface{ Rescored([]domain.Moved) }); ok && len(aged) > 0 {
		r.Rescored(aged)
	}
	return len(aged), nil
}

// pruneFinishedSQL deletes finished jobs of one state older than the
// cutoff. Ids are UUIDv7, so a job created after the cutoff (id above
// $3) cannot have finished before it: the id bound keeps the scan to old
// rows.
const pruneFinishedSQL = `
DELETE FROM jobs WHERE id IN (
	SELECT id FROM jobs
	WHERE status = $1 AND status <> 'running' AND deleted_at IS NULL AND id < $3 AND finished_at < $2
	ORDER BY id
	LIMIT $4
	FOR UPDATE SKIP LOCKED)`

const pruneBinSQL = `
DELETE FROM jobs WHERE id IN (
	SELECT id FROM jobs
	WHERE deleted_at IS NOT NULL AND deleted_at < $1 AND status <> 'running'
	ORDER BY deleted_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED)`

const pruneThroughputSQL = `DELETE FROM job_throughput WHERE bucket < now() - interval '2 days'`

// Prune deletes one batch (up to limit rows per kind) of finished jobs past
// their retention and binned jobs past the bin's, judged at now (nil: the
// database clock). It returns how many rows went.
func (s *Store) Prune(ctx context.Context, st domain.Settings, now *time.Time, limit int) (int, error) {
	var at time.Time
	var err error
	if now != nil {
		at = *now
	} else if at, err = s.DatabaseNow(ctx); err != nil {
		return 0, fmt.Errorf("prune: %w", err)
	}
	total := 0
	for _, r := range []struct {
		state jobs.State
		days  int
	}{
		{jobs.StateCompleted, st.RetentionCompletedDays},
		{jobs.StateCancelled, st.RetentionCancelledDays},
		{jobs.StateDeadLetter, st.RetentionDeadDays},
	} {
		if r.days <= 0 {
			continue
		}
		cutoff := at.Add(-time.Duration(r.days) * 24 * time.Hour)
		tag, err := s.pool.Exec(ctx, pruneFinishedSQL, string(r.state), cutoff, uuidV7Floor(cutoff), limit)
		if err != nil {
			return total, fmt.Errorf("prune %s jobs: %w", r.state, err)
		}
		total += int(tag.RowsAffected())
	}
	if st.RetentionBinDays > 0 {
		cutoff := at.Add(-time.Duration(st.RetentionBinDays) * 24 * time.Hour)
		tag, err := s.pool.Exec(ctx, pruneBinSQL, cutoff, limit)
		if err != nil {
			return total, fmt.Errorf("purge the bin: %w", err)
		}
		total += int(tag.RowsAffected())
	}
	if _, err := s.pool.Exec(ctx, pruneThroughputSQL); err != nil {
		return total, fmt.Errorf("prune throughput: %w", err)
	}
	n, err := s.PruneAudit(ctx, st.AuditRetentionDays)
	return total + n, errors.Join(err, s.pruneServedTypes(ctx), s.pruneSchemas(ctx))
}

// promoteIDsSQL promotes the given scheduled and waiting jobs that are
// due by the database clock, or within $2 ms of it, but for waits for a
// signal or an event (scheduler.DefaultPromoteAhead says why). Rows
// another scheduler is promoting right now are skipped, not waited for.
const promoteIDsSQL = `
WITH due AS MATERIALIZED (
	SELECT id AS due_id, wait_kind AS due_kind, wait_name AS due_wait FROM jobs
	WHERE id = ANY($1::uuid[]) AND status IN ('scheduled', 'waiting') AND deleted_at IS NULL
	  AND run_at <= now() + CASE WHEN wait_kind IN ('signal', 'event') THEN 0 ELSE $2::float8 END * interval '1 millisecond'
	FOR UPDATE SKIP LOCKED
),
` + promoteMovedSQL

// PromoteIDs promotes the given jobs if they are still scheduled (or
// waiting) and due, or due within ahead (see promoteIDsSQL). The queues
// of jobs promoted ahead of their time are woken again at that time, for
// the pull workers and push deliveries that claim only due jobs.
func (s *Store) PromoteIDs(ctx context.Context, ids []uuid.UUID, ahead time.Duration) ([]domain.Moved, error) {
	out, err := collectMoved(s.pool.Query(ctx, promoteIDsSQL, ids, float64(ahead)/float64(time.Millisecond)))
	if err != nil {
		return nil, fmt.Errorf("promote due jobs: %w", err)
	}
	s.publish(nil, out)
	s.wakeAtRunAt(out)
	return out, nil
}

// nowSQL reads the database clock (in a transaction: its start).
const nowSQL = `SELECT now()`

// DatabaseNow returns the database clock.
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := s.pool.QueryRow(ctx, nowSQL).Scan(&now)
	return now, err
}

// autovacuumSQL says whether autovacuum will vacuum the jobs table: it is
// on for the server and not switched off for the table.
const autovacuumSQL = `
SELECT current_setting('autovacuum')::bool
   AND NOT coalesce('autovacuum_enabled=false' = ANY(reloptions), false)
FROM pg_class WHERE oid = 'jobs'::regclass`

// AutovacuumOn says whether autovacuum will vacuum the jobs table. Without
// it, every claim and finish leaves dead row versions that nothing removes
// (Flint never vacuums by itself), and claims slow down as they pile up.
func (s *Store) AutovacuumOn(ctx context.Context) (bool, error) {
	var on bool
	if err := s.pool.QueryRow(ctx, autovacuumSQL).Scan(&on); err != nil {
		return false, fmt.Errorf("read autovacuum setting: %w", err)
	}
	return on, nil
}
