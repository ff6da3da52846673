package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
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

// cancelAuditSQL is the latest operator action on the audit trail that
// cancelled a job: a cancel, or the pause or deletion of its series.
const cancelAuditSQL = `
SELECT id, at, actor, source, ip, action, job_id, details FROM audit_log
WHERE job_id = $1 AND action = ANY($2::text[]) ORDER BY id DESC LIMIT 1`

// cancelActions are the audit actions that cancel jobs.
var cancelActions = []string{domain.AuditCancel, domain.AuditSeriesPause, domain.AuditSeriesDelete}

// CancelAudit returns the operator action on the audit trail that
// cancelled the job (a cancel, or the pause or deletion of its recurring
// series), or nil when the trail has none.
func (s *Store) CancelAudit(ctx context.Context, id uuid.UUID) (*domain.AuditEntry, error) {
	var rows []auditRow
	if err := s.sqlx.SelectContext(ctx, &rows, cancelAuditSQL, id, cancelActions); err != nil {
		return nil, fmt.Errorf("read the audit trail: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	e := rows[0].entry()
	return &e, nil
}

// liveWorkerTTL is how recent a worker's heartbeat must be to count as
// alive, as the Workers page counts it.
const liveWorkerTTL = 15 * time.Second

// ExplainFacts reads what Explain needs to say why the job is where it is:
// the job, the database clock, and, as its state calls for, its
// dependencies, its place in its queue, the live workers (with the queues
// they serve and the types they run), the job whose failure cancelled it,
// the operator's action that cancelled it on the audit trail and its last
// run.
func (s *Store) ExplainFacts(ctx context.Context, id uuid.UUID) (domain.ExplainFacts, error) {
	j, err := s.GetJob(ctx, id)
	if err != nil {
		return domain.ExplainFacts{}, err
	}
	return s.ExplainFactsFor(ctx, j)
}

// ExplainFactsFor is ExplainFacts for a job the caller has just read (the
// job page has), so that it is not read twice.
func (s *Store) ExplainFactsFor(ctx context.Context, j *jobs.Job) (domain.ExplainFacts, error) {
	id := j.ID
	var err error
	f := domain.ExplainFacts{Job: j, MaxInterruptions: s.maxInterruptions}
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
		if f.Queue, err = s.queueFacts(ctx, j); err != nil {
			return f, fmt.Errorf("explain: %w", err)
		}
	case jobs.StateScheduled:
		if j.ScheduleID != nil {
			if f.Queue, err = s.queueFacts(ctx, j); err != nil {
				return f, fmt.Errorf("explain: %w", err)
			}
		}
	case jobs.StateCancelled:
		if j.CancelledBy != nil {
			up, err := s.GetJob(ctx, *j.CancelledBy)
			switch {
			case err == nil:
				f.CancelledBy = &domain.DependencyRef{ID: up.ID, Type: up.Type, Status: up.Status}
			case !errors.Is(err, domain.ErrNotFound):
				return f, fmt.Errorf("explain: %w", err)
			}
		}
		if f.Cancel, err = s.CancelAudit(ctx, id); err != nil {
			return f, fmt.Errorf("explain: %w", err)
		}
		if j.Executions > 0 {
			runs, err := s.ListExecutions(ctx, j)
			if err != nil {
				return f, fmt.Errorf("explain: %w", err)
			}
			if len(runs) > 0 {
				f.LastRun = &runs[len(runs)-1]
			}
		}
	}
	if j.ScheduleID != nil && f.Queue != nil && f.Queue.Settings.Paused {
		if err := s.pool.QueryRow(ctx, seriesWaitingSQL, *j.ScheduleID).Scan(&f.SeriesWaiting); err != nil {
			return f, fmt.Errorf("explain: count the series' waiting occurrences: %w", err)
		}
	}
	switch j.Status {
	case jobs.StateQueued, jobs.StateScheduled, jobs.StateBlocked:
		if f.Workers, err = s.workerScopes(ctx); err != nil {
			return f, fmt.Errorf("explain: %w", err)
		}
	}
	return f, nil
}

// seriesWaitingSQL counts the occurrences of a series waiting in its queue.
const seriesWaitingSQL = `SELECT count(*) FROM jobs WHERE schedule_id = $1 AND status = 'queued' AND deleted_at IS NULL`

// workerScopeSQL reads who could run a job: the queues and job types of
// the workers whose heartbeat is recent (a process that runs only the API
// or the scheduler has no slots and runs nothing).
const workerScopeSQL = `
SELECT id, queues, types FROM workers
WHERE heartbeat_at > now() - $1 * interval '1 millisecond' AND concurrency > 0
ORDER BY started_at, id`

// workerScopes returns the live workers from the workers table (every
// worker heartbeats there, with Redis or without) with only their id,
// queues and job types.
func (s *Store) workerScopes(ctx context.Context) ([]domain.WorkerInfo, error) {
	var rows []struct {
		ID     string    `db:"id"`
		Queues textArray `db:"queues"`
		Types  textArray `db:"types"`
	}
	if err := s.sqlx.SelectContext(ctx, &rows, workerScopeSQL, float64(liveWorkerTTL)/float64(time.Millisecond)); err != nil {
		return nil, fmt.Errorf("read live workers: %w", err)
	}
	out := make([]domain.WorkerInfo, len(rows))
	for i, r := range rows {
		out[i] = domain.WorkerInfo{ID: r.ID, Queues: r.Queues, Types: r.Types}
	}
	return out, nil
}
