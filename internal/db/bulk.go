package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// restoreSQL brings jobs back from the bin in the states they had.
const restoreSQL = `
UPDATE jobs SET deleted_at = NULL, updated_at = now()
WHERE id = ANY($1::uuid[]) AND deleted_at IS NOT NULL
RETURNING ` + jobColumns

// RestoreJobs brings the given jobs back from the bin in one statement,
// waking the workers for those that return queued, and returns the jobs
// it restored; ids not in the bin are left out. Callers bound ids (a bulk
// action passes at most 500 at a time).
func (s *Store) RestoreJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	js, err := collectJobs(s.pool.Query(ctx, restoreSQL, ids))
	if err != nil {
		return nil, fmt.Errorf("restore jobs: %w", err)
	}
	s.wakeJobs(js...)
	return js, nil
}

// binCountByFilterSQL counts the jobs in the bin, of queue $1 and type $2
// when given, from job_counts.
const binCountByFilterSQL = `
SELECT coalesce(sum(n), 0)::bigint FROM job_counts
WHERE in_bin AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR type = $2)`

// CountBin counts the jobs in the bin of queue and type ("" for any),
// exactly, without a scan.
func (s *Store) CountBin(ctx context.Context, queue, typ string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, binCountByFilterSQL, nullIfEmpty(queue), nullIfEmpty(typ)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the bin: %w", err)
	}
	return n, nil
}

// cancelSQL cancels waiting jobs at once, or asks running ones to stop:
// their workers learn of it from the notification sent after the commit
// (or at the latest from the next heartbeat) and cancel the handler's
// context. One job or many ($1), the same statement.
const cancelSQL = `
WITH moved AS (
	UPDATE jobs SET
		status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,
		cancel_requested = (status = 'running'),
		finished_at = CASE WHEN status = 'running' THEN finished_at ELSE now() END,
		wait_kind = NULL, wait_name = NULL,
		updated_at = now()
	WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL AND status = ANY($2::text[])
	RETURNING ` + jobColumns + `
)
SELECT moved.* FROM moved`

// CancelJobs is CancelJob for many jobs in one transaction: it cancels the
// waiting ones (with what depends on them) and asks the workers of the
// running ones to stop, and returns the jobs it changed; those whose state
// allows no cancel are left out. Callers bound ids (a bulk action passes
// at most 500 at a time).
func (s *Store) CancelJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	var js []*jobs.Job
	var downstream []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if js, err = collectJobs(tx.Query(ctx, cancelSQL, ids, stateStrings(domain.CancelFrom))); err != nil {
			return err
		}
		downstream, err = cascade(ctx, tx, jobIDs(js))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel jobs: %w", err)
	}
	var cancelled []*jobs.Job
	for _, j := range js {
		if j.Status == jobs.StateCancelled {
			cancelled = append(cancelled, j)
		} else {
			s.wakeCancel(j.ID)
		}
	}
	s.emitJobs(cancelled...)
	s.emitMoved(downstream)
	return js, nil
}

// RetryJobs is RetryJob for many jobs in one transaction: dead-letter jobs
// replay (re-arming what their failure cancelled), scheduled ones run now.
// It returns the jobs it moved; the others are left out.
func (s *Store) RetryJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	var js []*jobs.Job
	var rearmed []domain.Moved
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := unarchive(ctx, tx, ids); err != nil {
			return err
		}
		var err error
		if js, err = collectJobs(tx.Query(ctx, retrySQL, ids, stateStrings(domain.RetryFrom))); err != nil {
			return err
		}
		rearmed, err = collectMoved(tx.Query(ctx, rearmSQL, jobIDs(js)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry jobs: %w", err)
	}
	s.publish(js, rearmed)
	return js, nil
}

// deleteSQL moves jobs to the bin. A binned job keeps its state but is
// never claimed or promoted; a running one is also asked to stop.
const deleteSQL = `
UPDATE jobs SET
	deleted_at = now(),
	cancel_requested = cancel_requested OR status = 'running',
	updated_at = now()
WHERE id = ANY($1::uuid[]) AND deleted_at IS NULL
RETURNING ` + jobColumns

// DeleteJobs is DeleteJob for many jobs in one transaction (from the
// history too), and returns the jobs it moved to the bin.
func (s *Store) DeleteJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	var js []*jobs.Job
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := unarchive(ctx, tx, ids); err != nil {
			return err
		}
		var err error
		js, err = collectJobs(tx.Query(ctx, deleteSQL, ids))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete jobs: %w", err)
	}
	for _, j := range js {
		if j.Status.Leased() {
			s.wakeCancel(j.ID)
		}
	}
	return js, nil
}

// jobIDs are the ids of js.
func jobIDs(js []*jobs.Job) []uuid.UUID {
	out := make([]uuid.UUID, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}
