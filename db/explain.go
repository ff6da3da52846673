package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
)

// explainAheadCap bounds the count of jobs ahead of a queued one: past it
// the answer is "more than", and the count stays an index range scan of
// bounded length.
const explainAheadCap = 10_000

// explainAheadSQL counts the queued jobs of a queue that come before a job
// in claim order, walking jobs_claim_queue_idx from its start.
const explainAheadSQL = `
SELECT count(*) FROM (
	SELECT 1 FROM jobs
	WHERE status = 'queued' AND deleted_at IS NULL AND queue = $1
	  AND (effective_priority, run_at, created_at, id) < ($2, $3, $4, $5)
	LIMIT $6
) ahead`

// explainCancelSQL is the latest operator cancel of a job on the audit trail.
const explainCancelSQL = `
SELECT id, at, actor, source, ip, action, job_id, details FROM audit_log
WHERE job_id = $1 AND action = 'cancel' ORDER BY id DESC LIMIT 1`

// liveWorkerTTL is how recent a worker's heartbeat must be to count as
// alive, as the Workers page counts it.
const liveWorkerTTL = 15 * time.Second

// ExplainFacts reads what Explain needs to say why the job is where it is:
// the job, the database clock, and, as its state calls for, its
// dependencies, its place in its queue, the live workers, the job whose
// failure cancelled it and the operator's cancel on the audit trail.
func (s *Store) ExplainFacts(ctx context.Context, id uuid.UUID) (jobs.ExplainFacts, error) {
	j, err := s.GetJob(ctx, id)
	if err != nil {
		return jobs.ExplainFacts{}, err
	}
	return s.ExplainFactsFor(ctx, j)
}

// ExplainFactsFor is ExplainFacts for a job the caller has just read (the
// job page has), so that it is not read twice.
func (s *Store) ExplainFactsFor(ctx context.Context, j *jobs.Job) (jobs.ExplainFacts, error) {
	id := j.ID
	var err error
	f := jobs.ExplainFacts{Job: j, MaxInterruptions: s.maxInterruptions}
	if f.Now, err = s.DatabaseNow(ctx); err != nil {
		return f, fmt.Errorf("explain: %w", err)
	}
	switch j.Status {
	case jobs.StateBlocked:
		deps, err := s.Dependencies(ctx, id)
		if err != nil {
			return f, fmt.Errorf("explain: %w", err)
		}
		f.Upstream = deps.Upstream
	case jobs.StateQueued:
		if err := s.pool.QueryRow(ctx, explainAheadSQL, j.Queue, j.EffectivePriority, j.RunAt, j.CreatedAt, j.ID,
			explainAheadCap).Scan(&f.Ahead); err != nil {
			return f, fmt.Errorf("explain: count jobs ahead: %w", err)
		}
		f.AheadCapped = f.Ahead >= explainAheadCap
		if f.Workers, err = s.ListWorkers(ctx, liveWorkerTTL); err != nil {
			return f, fmt.Errorf("explain: %w", err)
		}
		if f.Queue, err = s.queueFacts(ctx, j); err != nil {
			return f, fmt.Errorf("explain: %w", err)
		}
	case jobs.StateCancelled:
		if j.CancelledBy != nil {
			up, err := s.GetJob(ctx, *j.CancelledBy)
			switch {
			case err == nil:
				f.CancelledBy = &jobs.DependencyRef{ID: up.ID, Type: up.Type, Status: up.Status}
			case !errors.Is(err, jobs.ErrNotFound):
				return f, fmt.Errorf("explain: %w", err)
			}
		}
		var rows []auditRow
		if err := s.sqlx.SelectContext(ctx, &rows, explainCancelSQL, id); err != nil {
			return f, fmt.Errorf("explain: read the audit trail: %w", err)
		}
		if len(rows) > 0 {
			e := rows[0].entry()
			f.Cancel = &e
		}
	}
	return f, nil
}
