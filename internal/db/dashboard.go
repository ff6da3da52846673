package db

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// cappedCountsSQL counts each state up to $1. Claimed and running jobs
// (running rows without and with a start) are counted through the lease
// index; the others through the status index, which leaves running jobs out (the explicit status <>
// 'running' lets the planner use it for a state it only learns at run time).
const cappedCountsSQL = `
SELECT s AS state, CASE
	WHEN s = 'running' THEN (SELECT count(*) FROM (SELECT 1 FROM jobs
		WHERE status = 'running' AND started_at IS NOT NULL AND deleted_at IS NULL LIMIT $1) x)
	WHEN s = 'claimed' THEN (SELECT count(*) FROM (SELECT 1 FROM jobs
		WHERE status = 'running' AND started_at IS NULL AND deleted_at IS NULL LIMIT $1) x)
	ELSE (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE status = s AND status <> 'running' AND deleted_at IS NULL LIMIT $1) x)
	END AS n
FROM unnest($2::text[]) AS s`

// stateCountRow is a count of jobs in one state.
type stateCountRow struct {
	State string `db:"state"`
	N     int64  `db:"n"`
}

// finishedStateCountsSQL reads the exact counts of finished jobs per state
// that triggers keep in job_counts.
const finishedStateCountsSQL = `
SELECT s AS state, coalesce((SELECT sum(n) FROM job_counts WHERE status = s AND NOT in_bin), 0)::bigint AS n
FROM unnest($1::text[]) AS s`

// CappedCounts counts jobs per state. Finished states (completed,
// dead_letter, cancelled) are exact, from job_counts; the others are
// counted up to limit with one short index range scan per state, never a
// scan of the whole table, and a count that reaches limit comes with the
// planner's estimate (Capped).
func (s *Store) CappedCounts(ctx context.Context, states []jobs.State, limit int64) ([]domain.StateCount, error) {
	var live, finished []jobs.State
	for _, st := range states {
		if st.Terminal() {
			finished = append(finished, st)
		} else {
			live = append(live, st)
		}
	}
	var liveRows, finishedRows []stateCountRow
	if err := s.sqlx.SelectContext(ctx, &liveRows, cappedCountsSQL, limit, stateStrings(live)); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	if err := s.sqlx.SelectContext(ctx, &finishedRows, finishedStateCountsSQL, stateStrings(finished)); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	byState := map[string]stateCountRow{}
	for _, r := range append(liveRows, finishedRows...) {
		byState[r.State] = r
	}
	var out []domain.StateCount
	for _, st := range states {
		r := byState[string(st)]
		if st.Terminal() {
			out = append(out, domain.StateCount{State: st, Count: r.N})
			continue
		}
		sc := domain.StateCount{State: st, Count: r.N, Capped: r.N >= limit}
		if sc.Capped {
			est, err := s.estimateState(ctx, sc.State)
			if err != nil {
				return nil, fmt.Errorf("count jobs: %w", err)
			}
			sc.Estimate = max(est, sc.Count)
		}
		out = append(out, sc)
	}
	return out, nil
}

// estimateState is the planner's estimate of the live jobs in a state: the
// row count of a plan, from the column statistics ANALYZE (and autovacuum)
// keep, so it costs no scan and drifts only between analyses. The state is
// one of jobs.States, never caller text.
func (s *Store) estimateState(ctx context.Context, st jobs.State) (int64, error) {
	if !slices.Contains(jobs.States, st) {
		return 0, fmt.Errorf("estimate: unknown state %q", st)
	}
	var plan []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	var raw []byte
	if err := s.pool.QueryRow(ctx, fmt.Sprintf(estimateStateSQL, st.Stored())).Scan(&raw); err != nil {
		return 0, err
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) == 0 {
		return 0, fmt.Errorf("estimate: unreadable plan: %v", err)
	}
	return int64(plan[0].Plan.Rows), nil
}

// estimateStateSQL asks for the plan of a count's scan; %s is a state name.
const estimateStateSQL = `EXPLAIN (FORMAT JSON) SELECT 1 FROM jobs WHERE status = '%s' AND deleted_at IS NULL`

// recentFailuresSQL lists the latest failed or interrupted runs, one row
// per job (its latest failure, with how many of its runs failed among
// those read), of queue $2 or every queue (”). It reads at most the
// latest 2,000 failed runs (and dead-letter jobs of the history), so a
// queue whose failures are all older than those shows none.
const recentFailuresSQL = `
SELECT DISTINCT ON (job_id) job_id, type, queue, attempt, error, finished_at, outcome, status,
       count(*) OVER (PARTITION BY job_id) AS failures
FROM (
	(SELECT e.job_id, j.type, j.queue, e.attempt, coalesce(e.error, '') AS error, e.finished_at, e.outcome, j.status
	 FROM (SELECT * FROM job_executions WHERE outcome IN ('failed', 'interrupted')
	       ORDER BY finished_at DESC LIMIT 2000) e
	 JOIN jobs j ON j.id = e.job_id
	 WHERE $2 = '' OR j.queue = $2)
	UNION ALL
	(SELECT h.id, h.type, h.queue, h.attempt, coalesce(h.last_error, ''), h.finished_at, 'failed', h.status
	 FROM job_history h WHERE h.status = 'dead_letter' AND ($2 = '' OR h.queue = $2)
	 ORDER BY h.finished_at DESC
	 LIMIT $1)
) f
ORDER BY job_id, finished_at DESC`

// failureRow is a run that failed or was interrupted, with its job.
type failureRow struct {
	JobID      uuid.UUID `db:"job_id"`
	Type       string    `db:"type"`
	Queue      string    `db:"queue"`
	Attempt    int       `db:"attempt"`
	Error      string    `db:"error"`
	FinishedAt time.Time `db:"finished_at"`
	Outcome    string    `db:"outcome"`
	Status     string    `db:"status"`
	Failures   int       `db:"failures"`
}

// RecentFailures returns the latest failed or interrupted runs of queue
// (every queue when empty), newest first, one per job: a job that failed
// three times shows once, with Failures 3.
func (s *Store) RecentFailures(ctx context.Context, queue string, limit int) ([]domain.Failure, error) {
	var rows []failureRow
	if err := s.sqlx.SelectContext(ctx, &rows, recentFailuresSQL, limit, queue); err != nil {
		return nil, fmt.Errorf("recent failures: %w", err)
	}
	slices.SortFunc(rows, func(a, b failureRow) int { return b.FinishedAt.Compare(a.FinishedAt) })
	out := make([]domain.Failure, 0, min(len(rows), limit))
	for _, r := range rows[:min(len(rows), limit)] {
		out = append(out, domain.Failure{JobID: r.JobID, Type: r.Type, Queue: r.Queue, Attempt: r.Attempt, Error: logs.Scrub(r.Error),
			At: r.FinishedAt, Outcome: domain.Outcome(r.Outcome), JobState: jobs.State(r.Status), Failures: r.Failures})
	}
	return out, nil
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
	UNION
	SELECT queue FROM job_history_counts GROUP BY queue HAVING sum(n) > 0
) u ORDER BY queue LIMIT 200`

// Queues lists the queues that hold live jobs.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	var out []string
	if err := s.sqlx.SelectContext(ctx, &out, queuesSQL); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out, nil
}

// throughputRow is the runs that ended with one outcome in one minute.
type throughputRow struct {
	Bucket  time.Time `db:"bucket"`
	Outcome string    `db:"outcome"`
	N       int64     `db:"n"`
}

// Throughput returns finished runs per minute over the last hour.
func (s *Store) Throughput(ctx context.Context) ([]domain.ThroughputBucket, error) {
	return s.ThroughputOver(ctx, "", time.Hour, time.Minute)
}

// throughputOverSQL sums finished runs per outcome in bars of $2 seconds
// over the last $1 seconds (whole bars, the current one included).
const throughputOverSQL = `
SELECT date_bin(make_interval(secs => $2), bucket, 'epoch'::timestamptz) AS bucket, outcome, sum(n)::bigint AS n
FROM job_throughput
WHERE bucket >= date_bin(make_interval(secs => $2), now(), 'epoch'::timestamptz) - make_interval(secs => $1 - $2)
  AND ($3 = '' OR queue = $3)
GROUP BY 1, 2 ORDER BY 1`

// ThroughputOver returns finished runs of queue (every queue when empty)
// per step (a whole number of minutes) over the last span, oldest first.
// The table keeps two days.
func (s *Store) ThroughputOver(ctx context.Context, queue string, span, step time.Duration) ([]domain.ThroughputBucket, error) {
	if step < time.Minute || step%time.Minute != 0 || span < step || span > 48*time.Hour {
		return nil, jobs.Invalid("range", "must be whole minutes per bar over at most two days")
	}
	var rows []throughputRow
	if err := s.sqlx.SelectContext(ctx, &rows, throughputOverSQL, span.Seconds(), step.Seconds(), queue); err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	var out []domain.ThroughputBucket
	for _, r := range rows {
		if len(out) == 0 || !out[len(out)-1].Minute.Equal(r.Bucket) {
			out = append(out, domain.ThroughputBucket{Minute: r.Bucket, Outcomes: map[string]int64{}})
		}
		out[len(out)-1].Outcomes[r.Outcome] = r.N
	}
	return out, nil
}

// retryingSQL counts, up to $1, the jobs waiting to retry: scheduled after
// a failed attempt.
const retryingSQL = `
SELECT count(*) FROM (
	SELECT 1 FROM jobs WHERE status = 'scheduled' AND attempt > 0 AND deleted_at IS NULL LIMIT $1
) r`

// sleepingSQL counts, up to $1, the waiting jobs that sleep (the rest
// wait for a signal or an event).
const sleepingSQL = `
SELECT count(*) FROM (
	SELECT 1 FROM jobs WHERE status = 'waiting' AND wait_kind = 'sleep' AND deleted_at IS NULL LIMIT $1
) r`

// CountSleeping counts the waiting jobs that sleep (jobs.Sleep), up to
// limit.
func (s *Store) CountSleeping(ctx context.Context, limit int64) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, sleepingSQL, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sleeping jobs: %w", err)
	}
	return n, nil
}

// CountRetrying counts the jobs waiting for a retry (scheduled after a
// failed attempt), up to limit.
func (s *Store) CountRetrying(ctx context.Context, limit int64) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, retryingSQL, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("count retrying jobs: %w", err)
	}
	return n, nil
}
