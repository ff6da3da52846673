package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/flinthq/flint/jobs"
)

// restoreManySQL brings jobs back from the bin in the states they had.
const restoreManySQL = `
UPDATE jobs SET deleted_at = NULL, updated_at = now()
WHERE id = ANY($1::uuid[]) AND deleted_at IS NOT NULL
RETURNING ` + jobColumns

// RestoreJobs brings the given jobs back from the bin in one statement,
// waking the workers for those that return queued, and returns the jobs
// it restored; ids not in the bin are left out. Callers bound ids (a bulk
// action passes at most 500 at a time).
func (s *Store) RestoreJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	js, err := collectJobs(s.pool.Query(ctx, restoreManySQL, ids))
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
