package db

import (
	"context"
	"fmt"
	"time"

	"flint/jobs"
)

// cappedCountsSQL counts each state up to $1. Running jobs are counted
// through the lease index; the others through the status index, which leaves running jobs out (the explicit status <>
// 'running' lets the planner use it for a state it only learns at run time).
const cappedCountsSQL = `
SELECT s, CASE WHEN s = 'running'
	THEN (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = 'running' AND deleted_at IS NULL LIMIT $1) x)
	ELSE (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = s AND status <> 'running' AND deleted_at IS NULL LIMIT $1) x)
	END
FROM unnest($2::text[]) AS s`

// CappedCounts counts live jobs per state, each up to limit: one short index
// range scan per state, never a scan of the whole table. A count equal to
// limit means "at least".
func (s *Store) CappedCounts(ctx context.Context, states []jobs.State, limit int64) ([]jobs.StateCount, error) {
	rows, err := s.pool.Query(ctx, cappedCountsSQL, limit, stateStrings(states))
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	var out []jobs.StateCount
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out = append(out, jobs.StateCount{State: jobs.State(st), Count: n, Capped: n >= limit})
	}
	return out, rows.Err()
}

const recentFailuresSQL = `
SELECT e.job_id, j.type, j.queue, e.attempt, coalesce(e.error, ''), e.finished_at, e.outcome, j.status
FROM job_executions e JOIN jobs j ON j.id = e.job_id
WHERE e.outcome <> 'succeeded' AND e.outcome <> 'cancelled'
ORDER BY e.finished_at DESC
LIMIT $1`

// RecentFailures returns the latest failed or interrupted runs.
func (s *Store) RecentFailures(ctx context.Context, limit int) ([]jobs.Failure, error) {
	rows, err := s.pool.Query(ctx, recentFailuresSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("recent failures: %w", err)
	}
	defer rows.Close()
	var out []jobs.Failure
	for rows.Next() {
		var f jobs.Failure
		var outcome, status string
		if err := rows.Scan(&f.JobID, &f.Type, &f.Queue, &f.Attempt, &f.Error, &f.At, &outcome, &status); err != nil {
			return nil, fmt.Errorf("recent failures: %w", err)
		}
		f.Outcome, f.JobState = jobs.Outcome(outcome), jobs.State(status)
		out = append(out, f)
	}
	return out, rows.Err()
}

// queuesSQL lists distinct queues by skipping through the queue index
// (one probe per queue) instead of scanning every job. That index leaves
// running jobs out; their queues come from the lease index.
const queuesSQL = `
WITH RECURSIVE q AS (
	(SELECT queue FROM jobs WHERE deleted_at IS NULL AND status <> 'running' ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT j.queue FROM jobs j
	        WHERE j.deleted_at IS NULL AND j.status <> 'running' AND j.queue > q.queue ORDER BY j.queue LIMIT 1)
	FROM q WHERE q.queue IS NOT NULL
)
SELECT queue FROM (
	SELECT queue FROM q WHERE queue IS NOT NULL
	UNION
	SELECT queue FROM jobs WHERE status = 'running' AND deleted_at IS NULL
) u ORDER BY queue LIMIT 200`

// Queues lists the queues that hold live jobs.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, queuesSQL)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

const throughputSinceSQL = `
SELECT bucket, outcome, sum(n)::bigint FROM job_throughput
WHERE bucket >= date_trunc('minute', now()) - interval '59 minutes'
GROUP BY bucket, outcome ORDER BY bucket`

// Throughput returns finished runs per minute over the last hour.
func (s *Store) Throughput(ctx context.Context) ([]jobs.ThroughputBucket, error) {
	rows, err := s.pool.Query(ctx, throughputSinceSQL)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	defer rows.Close()
	var out []jobs.ThroughputBucket
	for rows.Next() {
		var bucket time.Time
		var outcome string
		var n int64
		if err := rows.Scan(&bucket, &outcome, &n); err != nil {
			return nil, err
		}
		if len(out) == 0 || !out[len(out)-1].Minute.Equal(bucket) {
			out = append(out, jobs.ThroughputBucket{Minute: bucket, Outcomes: map[string]int64{}})
		}
		out[len(out)-1].Outcomes[outcome] = n
	}
	return out, rows.Err()
}
