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

// CancelJob cancels a waiting job or requests cancellation of a running one.
// A waiting job's downstream jobs are cancelled with it (cascade); a
// running job's are cancelled when its worker acknowledges.
func (s *Store) CancelJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	var j *jobs.Job
	var downstream []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if j, err = collectOneJob(tx.Query(ctx, cancelSQL, []uuid.UUID{id}, stateStrings(domain.CancelFrom))); err != nil {
			return err
		}
		downstream, err = cascade(ctx, tx, []uuid.UUID{id})
		return err
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.explain(ctx, id, "cancel", domain.CancelFrom)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel job: %w", err)
	}
	if j.Status == jobs.StateCancelled {
		s.emitJobs(j)
	} else {
		s.wakeCancel(j.ID)
	}
	s.emitMoved(downstream)
	return j, nil
}

// retrySQL replays a dead-letter job (attempts, interruptions and aging
// reset) or runs a scheduled job now.
const retrySQL = `
WITH moved AS (
	UPDATE jobs SET
		status = 'queued',
		run_at = LEAST(run_at, now()),
		attempt = CASE WHEN status = 'dead_letter' THEN 0 ELSE attempt END,
		interruptions = CASE WHEN status = 'dead_letter' THEN 0 ELSE interruptions END,
		effective_priority = CASE WHEN status = 'dead_letter' THEN priority ELSE effective_priority END,
		finished_at = NULL,
		updated_at = now()
	WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL AND status = ANY($2::text[])
	RETURNING ` + jobColumns + `
)
SELECT moved.* FROM moved`

// RetryJob replays a dead-letter job or runs a scheduled one now.
// Replaying a dead-letter job also re-arms the downstream jobs its failure
// cancelled.
func (s *Store) RetryJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	var j *jobs.Job
	var rearmed []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := unarchive(ctx, tx, []uuid.UUID{id}); err != nil {
			return err
		}
		var err error
		if j, err = collectOneJob(tx.Query(ctx, retrySQL, []uuid.UUID{id}, stateStrings(domain.RetryFrom))); err != nil {
			return err
		}
		rearmed, err = collectMoved(tx.Query(ctx, rearmSQL, []uuid.UUID{id}))
		return err
	})
	if err == nil {
		s.publish([]*jobs.Job{j}, rearmed)
	}
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.explain(ctx, id, "retry", domain.RetryFrom)
	}
	if err != nil {
		return nil, fmt.Errorf("retry job: %w", err)
	}
	return j, nil
}

// dlqPageSQL picks the next page of dead-letter jobs to replay.
const dlqPageSQL = `
SELECT id FROM jobs
WHERE status = 'dead_letter' AND deleted_at IS NULL AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[]))
ORDER BY id
LIMIT $2`

// RetryDLQ replays the given dead-letter jobs, or every one when ids is nil,
// in batches so no statement holds many locks for long. It returns the
// replayed jobs.
func (s *Store) RetryDLQ(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	const batch = 1000
	var out []*jobs.Job
	from := []string{string(jobs.StateDeadLetter)}
	for {
		var page []uuid.UUID
		var moved []*jobs.Job
		var rearmed []domain.Moved
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			// Dead-letter jobs in the history come back first, in the
			// replay's own transaction.
			if err := unarchiveDead(ctx, tx, ids, batch); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, dlqPageSQL, ids, batch)
			if err == nil {
				page, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			}
			if err != nil || len(page) == 0 {
				return err
			}
			if moved, err = collectJobs(tx.Query(ctx, retrySQL, page, from)); err != nil {
				return err
			}
			rearmed, err = collectMoved(tx.Query(ctx, rearmSQL, page))
			return err
		})
		if err != nil {
			return out, fmt.Errorf("replay dead-letter queue: %w", err)
		}
		s.publish(moved, rearmed)
		out = append(out, moved...)
		if ids != nil || len(page) < batch {
			return out, nil
		}
	}
}

// DeleteJob moves a job to the bin (from the history too: the bin is in
// jobs).
func (s *Store) DeleteJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	var j *jobs.Job
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := unarchive(ctx, tx, []uuid.UUID{id}); err != nil {
			return err
		}
		var err error
		j, err = collectOneJob(tx.Query(ctx, deleteSQL, []uuid.UUID{id}))
		return err
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.explainBin(ctx, id, "delete", true)
	}
	if err != nil {
		return nil, fmt.Errorf("delete job: %w", err)
	}
	if j.Status.Leased() {
		s.wakeCancel(j.ID)
	}
	return j, nil
}

// RestoreJob brings a job back from the bin, waking the workers if it
// returns queued. A job not in the bin is a *domain.TransitionError saying
// so; an unknown one is domain.ErrNotFound.
func (s *Store) RestoreJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	j, err := collectOneJob(s.pool.Query(ctx, restoreSQL, []uuid.UUID{id}))
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.explainBin(ctx, id, "restore", false)
	}
	if err != nil {
		return nil, fmt.Errorf("restore job: %w", err)
	}
	s.wakeJobs(j)
	return j, nil
}

// purgeSQL deletes a binned job for good, with its executions. A job still
// running is left alone until its worker lets go.
const purgeSQL = `DELETE FROM jobs WHERE id = $1 AND deleted_at IS NOT NULL AND status <> 'running'`

// PurgeJob deletes a job from the bin for good, with its runs. A job not
// in the bin, or still running there, is a *domain.TransitionError saying
// so; an unknown one is domain.ErrNotFound.
func (s *Store) PurgeJob(ctx context.Context, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, purgeSQL, id)
	if err != nil {
		return fmt.Errorf("purge job: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return s.explainBin(ctx, id, "purge", false)
	}
	return nil
}

const jobStateSQL = `(SELECT status, deleted_at IS NOT NULL FROM jobs WHERE id = $1)
UNION ALL (SELECT status, false FROM job_history WHERE id = $1 AND finished_at >= $2) LIMIT 1`

// jobState reads a job's state and whether it is in the bin, to explain a
// refused operation.
func (s *Store) jobState(ctx context.Context, id uuid.UUID, op string) (jobs.State, bool, error) {
	var status string
	var binned bool
	err := s.pool.QueryRow(ctx, jobStateSQL, id, historyFloor(id)).Scan(&status, &binned)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", false, domain.ErrNotFound
	case err != nil:
		return "", false, fmt.Errorf("%s job: %w", op, err)
	}
	return jobs.State(status), binned, nil
}

// explain says why an operation guarded by a state set matched no row.
func (s *Store) explain(ctx context.Context, id uuid.UUID, op string, allowed []jobs.State) error {
	st, binned, err := s.jobState(ctx, id, op)
	switch {
	case err != nil:
		return err
	case binned:
		return &domain.TransitionError{Op: op, From: st, Reason: "it is in the bin; restore it first"}
	default:
		return &domain.TransitionError{Op: op, From: st, Allowed: allowed}
	}
}

// explainBin says why a bin operation matched no row.
func (s *Store) explainBin(ctx context.Context, id uuid.UUID, op string, wantOutside bool) error {
	st, binned, err := s.jobState(ctx, id, op)
	switch {
	case err != nil:
		return err
	case wantOutside && binned:
		return &domain.TransitionError{Op: op, From: st, Reason: "it is already in the bin"}
	case !wantOutside && !binned:
		return &domain.TransitionError{Op: op, From: st, Reason: "it is not in the bin; delete it first"}
	default:
		return &domain.TransitionError{Op: op, From: st, Reason: "it is still running; cancel it and wait for its worker to stop"}
	}
}

// deleteDLQSQL moves a page of dead-letter jobs to the bin.
const deleteDLQSQL = `
UPDATE jobs SET deleted_at = now(), updated_at = now()
WHERE id = ANY($1::uuid[]) AND status = 'dead_letter' AND deleted_at IS NULL
RETURNING id`

// DeleteDLQ moves the given dead-letter jobs, or every one when ids is nil
// (those in the history too), to the bin, in batches so no statement
// holds many locks for long, and returns their ids. They can be restored
// from the bin until it is emptied.
func (s *Store) DeleteDLQ(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	const batch = 1000
	var out []uuid.UUID
	for {
		var moved []uuid.UUID
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			if err := unarchiveDead(ctx, tx, ids, batch); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, dlqPageSQL, ids, batch)
			if err != nil {
				return err
			}
			page, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil || len(page) == 0 {
				return err
			}
			if rows, err = tx.Query(ctx, deleteDLQSQL, page); err != nil {
				return err
			}
			moved, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			return err
		})
		if err != nil {
			return out, fmt.Errorf("delete dead-letter queue: %w", err)
		}
		out = append(out, moved...)
		if ids != nil || len(moved) < batch {
			return out, nil
		}
	}
}

// dlqGroupsSQL groups the dead-letter queue, the history's part included,
// by type and the first line of the last error.
const dlqGroupsSQL = `
SELECT type, error, count(*) AS n, max(finished_at) AS latest FROM (
	SELECT type, left(split_part(coalesce(last_error, ''), E'\n', 1), 300) AS error, finished_at
	FROM jobs WHERE status = 'dead_letter' AND deleted_at IS NULL
	UNION ALL
	SELECT type, left(split_part(coalesce(last_error, ''), E'\n', 1), 300), finished_at
	FROM job_history WHERE status = 'dead_letter'
) d
GROUP BY type, error
ORDER BY n DESC, latest DESC
LIMIT $1`

// DLQGroups groups the dead-letter queue by type and error (the error's
// first line), largest group first, up to limit groups.
func (s *Store) DLQGroups(ctx context.Context, limit int) ([]domain.ErrorGroup, error) {
	rows, err := s.pool.Query(ctx, dlqGroupsSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("group dead-letter queue: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.ErrorGroup, error) {
		var g domain.ErrorGroup
		var latest *time.Time
		err := r.Scan(&g.Type, &g.Error, &g.Count, &latest)
		if latest != nil {
			g.Latest = *latest
		}
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("group dead-letter queue: %w", err)
	}
	return out, nil
}
