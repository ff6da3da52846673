package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// ErrScheduleNotFound means no recurring series has the given id.
var ErrScheduleNotFound = fmt.Errorf("no such recurring series: %w", domain.ErrNotFound)

const scheduleColumns = `id, type, queue, payload, priority, max_retries, timeout_seconds, interval_seconds,
	cron, timezone, paused, last_run_at, next_run_at, created_at, updated_at`

// scheduleRow is a job_schedules row, scanned by position (its fields
// follow scheduleColumns) like jobRow: the scheduler reads series in its
// own transactions, so listings read them the same way.
type scheduleRow struct {
	ID              uuid.UUID
	Type            string
	Queue           string
	Payload         []byte
	Priority        int16
	MaxRetries      int32
	TimeoutSeconds  *int32
	IntervalSeconds *int64
	Cron            *string
	Timezone        string
	Paused          bool
	LastRunAt       *time.Time
	NextRunAt       *time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

func (r *scheduleRow) toSchedule() *domain.Schedule {
	s := &domain.Schedule{
		ID: r.ID, Type: r.Type, Queue: r.Queue, Payload: r.Payload, Priority: int(r.Priority),
		MaxRetries: int(r.MaxRetries), Timezone: r.Timezone, Paused: r.Paused,
		LastRunAt: r.LastRunAt, NextRunAt: r.NextRunAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if r.TimeoutSeconds != nil {
		s.TimeoutSeconds = int(*r.TimeoutSeconds)
	}
	if r.IntervalSeconds != nil {
		s.IntervalSeconds = *r.IntervalSeconds
	}
	if r.Cron != nil {
		s.Cron = *r.Cron
	}
	return s
}

func collectSchedules(rows pgx.Rows, err error) ([]*domain.Schedule, error) {
	if err != nil {
		return nil, err
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[scheduleRow])
	if err != nil {
		return nil, err
	}
	out := make([]*domain.Schedule, len(rs))
	for i, r := range rs {
		out[i] = r.toSchedule()
	}
	return out, nil
}

// needingOccurrenceSQL finds series that are not paused and have no pending
// occurrence, locking them so that concurrent schedulers each take
// different series.
const needingOccurrenceSQL = `
SELECT ` + scheduleColumns + ` FROM job_schedules s
WHERE NOT s.paused AND NOT EXISTS (
	SELECT 1 FROM jobs j
	WHERE j.schedule_id = s.id AND j.status = 'scheduled' AND j.executions = 0 AND j.deleted_at IS NULL)
ORDER BY s.id
LIMIT $1
FOR UPDATE SKIP LOCKED`

const lastTargetSQL = `SELECT greatest(
	(SELECT max(scheduled_for) FROM jobs WHERE schedule_id = $1),
	(SELECT max(scheduled_for) FROM job_history WHERE schedule_id = $1))`

// insertOccurrenceSQL creates an occurrence of a series as a job, for time
// $3 (NULL: now, to run at once). A conflict (the series already has a
// pending occurrence, or one for that time) makes it a no-op: the unique
// indexes, not the caller's care, keep a series to one pending occurrence.
// Its caller wakes the workers (a queued occurrence) or the schedulers (a
// scheduled one) once it has committed.
const insertOccurrenceSQL = `
WITH target AS (SELECT coalesce($3::timestamptz, now()) AS at),
inserted AS (
	INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, max_retries,
	                  run_at, timeout_seconds, schedule_id, scheduled_for, concurrency_key)
	SELECT $2, s.type, s.queue, s.payload, s.priority, s.priority,
	       CASE WHEN target.at > now() THEN 'scheduled' ELSE 'queued' END,
	       s.max_retries, target.at, s.timeout_seconds, s.id, target.at, s.concurrency_key
	FROM job_schedules s, target WHERE s.id = $1
	ON CONFLICT DO NOTHING
	RETURNING id, status, type, queue, attempt, run_at, effective_priority, created_at, batch_id
)
SELECT inserted.id, inserted.status, inserted.type, inserted.queue, inserted.attempt,
       inserted.effective_priority, inserted.run_at, inserted.created_at, inserted.batch_id FROM inserted`

// lastRunSQL reads when the latest occurrence of series $1 that ran
// started: the newest occurrences first, through the series' indexes,
// until one that started.
const lastRunSQL = `SELECT greatest(
	(SELECT started_at FROM jobs WHERE schedule_id = $1 AND started_at IS NOT NULL ORDER BY scheduled_for DESC LIMIT 1),
	(SELECT started_at FROM job_history WHERE schedule_id = $1 AND started_at IS NOT NULL ORDER BY scheduled_for DESC LIMIT 1))`

const markScheduleSQL = `
UPDATE job_schedules SET last_run_at = $2, next_run_at = $3, updated_at = now() WHERE id = $1`

// EnsureNextOccurrences gives up to limit series that lack one their next
// pending occurrence. It returns the occurrences created. Safe to run in
// any number of processes at once.
func (s *Store) EnsureNextOccurrences(ctx context.Context, limit int) ([]domain.Moved, error) {
	var out []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		series, err := collectSchedules(tx.Query(ctx, needingOccurrenceSQL, limit))
		if err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
			return err
		}
		for _, sc := range series {
			m, err := ensureOccurrence(ctx, tx, sc, now)
			if err != nil {
				return err
			}
			if m != nil {
				out = append(out, *m)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create next occurrences: %w", err)
	}
	s.publish(nil, out)
	return out, nil
}

// ensureOccurrence creates the pending occurrence of one locked series.
func ensureOccurrence(ctx context.Context, tx pgx.Tx, sc *domain.Schedule, now time.Time) (*domain.Moved, error) {
	var last *time.Time
	if err := tx.QueryRow(ctx, lastTargetSQL, sc.ID).Scan(&last); err != nil {
		return nil, err
	}
	var ran *time.Time
	if err := tx.QueryRow(ctx, lastRunSQL, sc.ID).Scan(&ran); err != nil {
		return nil, err
	}
	next, err := sc.NextFire(last, now)
	if err != nil {
		// A series that can never fire again stays as it is; it shows in
		// the dashboard with no next run.
		_, uerr := tx.Exec(ctx, markScheduleSQL, sc.ID, ran, nil)
		return nil, uerr
	}
	if !next.After(now) {
		next = now.Add(time.Millisecond) // a first interval occurrence: due at once, but pending
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	moved, err := collectMoved(tx.Query(ctx, insertOccurrenceSQL, sc.ID, id, next))
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, markScheduleSQL, sc.ID, ran, next); err != nil {
		return nil, err
	}
	if len(moved) == 0 {
		return nil, nil
	}
	return &moved[0], nil
}

const listSchedulesSQL = `SELECT ` + scheduleColumns + ` FROM job_schedules ORDER BY id DESC LIMIT 1000`

// ListSchedules returns every recurring series, newest first.
func (s *Store) ListSchedules(ctx context.Context) ([]*domain.Schedule, error) {
	out, err := collectSchedules(s.pool.Query(ctx, listSchedulesSQL))
	if err == nil {
		err = s.seriesQueues(ctx, out)
	}
	if err != nil {
		return nil, fmt.Errorf("list recurring series: %w", err)
	}
	return out, nil
}

// seriesQueueSQL reads, per series of $1, whether its queue is paused,
// how many of its occurrences wait in the queue, and when its latest
// occurrence that ran started (as lastRunSQL: read now, so an occurrence
// that started since the series was last served counts).
const seriesQueueSQL = `
SELECT s.id, coalesce(q.paused, false),
       (SELECT count(*) FROM jobs j WHERE j.schedule_id = s.id AND j.status = 'queued' AND j.deleted_at IS NULL),
       greatest(
	(SELECT started_at FROM jobs WHERE schedule_id = s.id AND started_at IS NOT NULL ORDER BY scheduled_for DESC LIMIT 1),
	(SELECT started_at FROM job_history WHERE schedule_id = s.id AND started_at IS NOT NULL ORDER BY scheduled_for DESC LIMIT 1))
FROM job_schedules s LEFT JOIN queues q ON q.name = s.queue
WHERE s.id = ANY($1::uuid[])`

// seriesQueues fills in each series' QueuePaused, Waiting and LastRunAt.
func (s *Store) seriesQueues(ctx context.Context, series []*domain.Schedule) error {
	if len(series) == 0 {
		return nil
	}
	byID := make(map[uuid.UUID]*domain.Schedule, len(series))
	ids := make([]uuid.UUID, len(series))
	for i, sc := range series {
		byID[sc.ID], ids[i] = sc, sc.ID
	}
	rows, err := s.pool.Query(ctx, seriesQueueSQL, ids)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var paused bool
		var waiting int64
		var ran *time.Time
		if err := rows.Scan(&id, &paused, &waiting, &ran); err != nil {
			return err
		}
		if sc := byID[id]; sc != nil {
			sc.QueuePaused, sc.Waiting, sc.LastRunAt = paused, waiting, ran
		}
	}
	return rows.Err()
}

const getScheduleSQL = `SELECT ` + scheduleColumns + ` FROM job_schedules WHERE id = $1`

// GetSchedule returns one recurring series, or ErrScheduleNotFound.
func (s *Store) GetSchedule(ctx context.Context, id uuid.UUID) (*domain.Schedule, error) {
	out, err := collectSchedules(s.pool.Query(ctx, getScheduleSQL, id))
	if err == nil {
		err = s.seriesQueues(ctx, out)
	}
	if err != nil {
		return nil, fmt.Errorf("get recurring series: %w", err)
	}
	if len(out) == 0 {
		return nil, ErrScheduleNotFound
	}
	return out[0], nil
}

// cancelPendingSQL cancels the pending occurrence of a series.
const cancelPendingSQL = `
UPDATE jobs SET status = 'cancelled', finished_at = now(), updated_at = now(), last_error = $2
WHERE schedule_id = $1 AND status = 'scheduled' AND executions = 0
RETURNING id, status, type, queue, attempt, effective_priority, run_at, created_at, batch_id`

const pauseScheduleSQL = `UPDATE job_schedules SET paused = true, next_run_at = NULL, updated_at = now() WHERE id = $1`

// PauseSchedule stops a series: its pending occurrence is cancelled and no
// other is created until it is resumed. It returns the series and the id
// of the occurrence it cancelled (none when there was none), for the
// audit trail.
func (s *Store) PauseSchedule(ctx context.Context, id uuid.UUID) (*domain.Schedule, []uuid.UUID, error) {
	var cancelled []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pauseScheduleSQL, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrScheduleNotFound
		}
		cancelled, err = collectMoved(tx.Query(ctx, cancelPendingSQL, id, domain.SeriesPausedError))
		return err
	})
	if err != nil {
		return nil, nil, wrapSchedule("pause recurring series", err)
	}
	s.emitMoved(cancelled)
	sc, err := s.GetSchedule(ctx, id)
	return sc, movedIDs(cancelled), err
}

// movedIDs lists the ids of the jobs that moved.
func movedIDs(moved []domain.Moved) []uuid.UUID {
	var ids []uuid.UUID
	for _, m := range moved {
		ids = append(ids, m.JobID)
	}
	return ids
}

const resumeScheduleSQL = `UPDATE job_schedules SET paused = false, updated_at = now() WHERE id = $1 RETURNING ` + scheduleColumns

// ResumeSchedule restarts a paused series from now on.
func (s *Store) ResumeSchedule(ctx context.Context, id uuid.UUID) (*domain.Schedule, error) {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		series, err := collectSchedules(tx.Query(ctx, resumeScheduleSQL, id))
		if err != nil {
			return err
		}
		if len(series) == 0 {
			return ErrScheduleNotFound
		}
		var now time.Time
		if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
			return err
		}
		_, err = ensureOccurrence(ctx, tx, series[0], now)
		return err
	})
	if err != nil {
		return nil, wrapSchedule("resume recurring series", err)
	}
	return s.GetSchedule(ctx, id)
}

// RunScheduleNow enqueues an extra occurrence of a series to run at once;
// the pending occurrence keeps its time.
func (s *Store) RunScheduleNow(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	jid, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	moved, err := collectMoved(s.pool.Query(ctx, insertOccurrenceSQL, id, jid, nil))
	if err == nil && len(moved) == 0 {
		err = ErrScheduleNotFound
	}
	if err != nil {
		return nil, wrapSchedule("run recurring series now", err)
	}
	s.publish(nil, moved)
	return s.GetJob(ctx, jid)
}

const deleteScheduleSQL = `DELETE FROM job_schedules WHERE id = $1`

// DeleteSchedule ends a series for good: its pending occurrence is
// cancelled; past occurrences stay, unlinked. It returns the id of the
// occurrence it cancelled, if any, for the audit trail.
func (s *Store) DeleteSchedule(ctx context.Context, id uuid.UUID) ([]uuid.UUID, error) {
	var cancelled []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if cancelled, err = collectMoved(tx.Query(ctx, cancelPendingSQL, id, domain.SeriesDeletedError)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, deleteScheduleSQL, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrScheduleNotFound
		}
		return nil
	})
	if err != nil {
		return nil, wrapSchedule("delete recurring series", err)
	}
	s.emitMoved(cancelled)
	return movedIDs(cancelled), nil
}

func wrapSchedule(op string, err error) error {
	if err == nil || errors.Is(err, domain.ErrNotFound) {
		return err
	}
	return fmt.Errorf("%s: %w", op, err)
}
