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

// getJobSQL reads one job, binned or not, live or in the history (looked
// at only when jobs does not have it).
const getJobSQL = `(SELECT ` + jobColumns + ` FROM jobs WHERE id = $1)
UNION ALL (SELECT ` + jobColumns + ` FROM job_history WHERE id = $1 AND finished_at >= $2) LIMIT 1`

// GetJob returns one job, live, binned or in the history, or
// domain.ErrNotFound when no job has id.
func (s *Store) GetJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error) {
	j, err := collectOneJob(s.pool.Query(ctx, getJobSQL, id, historyFloor(id)))
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return nil, fmt.Errorf("get job: %w", err)
	}
	return j, err
}

// getJobsSQL reads the jobs among a set of ids, binned or not, live or in
// the history.
const getJobsSQL = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ANY($1::uuid[])
UNION ALL SELECT ` + jobColumns + ` FROM job_history WHERE id = ANY($1::uuid[]) AND finished_at >= $2`

// GetJobs returns the jobs among ids that exist, binned or not, in no
// particular order: one query for a set of rows a page shows.
func (s *Store) GetJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := collectJobs(s.pool.Query(ctx, getJobsSQL, ids, historyFloor(ids...)))
	if err != nil {
		return nil, fmt.Errorf("get jobs: %w", err)
	}
	return out, nil
}

// executionRow is a job_executions row.
type executionRow struct {
	JobID      uuid.UUID `db:"job_id"`
	Seq        int       `db:"seq"`
	Attempt    int       `db:"attempt"`
	WorkerID   string    `db:"worker_id"`
	StartedAt  time.Time `db:"started_at"`
	FinishedAt time.Time `db:"finished_at"`
	Outcome    string    `db:"outcome"`
	Error      *string   `db:"error"`
	DurationMS int64     `db:"duration_ms"`
}

// executionsSQL reads a job's runs, from job_executions or, for a job in
// the history, from the runs it carries.
const executionsSQL = `
SELECT job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms
FROM job_executions WHERE job_id = $1
UNION ALL
SELECT h.id, x.seq, x.attempt, x.worker_id, x.started_at, x.finished_at, x.outcome, x.error, x.duration_ms
FROM job_history h, jsonb_to_recordset(h.execution_rows) AS ` + executionRecord + `
WHERE h.id = $1 AND h.finished_at >= $2
ORDER BY seq`

// ListExecutions returns every recorded run of a job in order, followed by
// the run in progress when the job is running.
func (s *Store) ListExecutions(ctx context.Context, j *jobs.Job) ([]domain.Execution, error) {
	var rows []executionRow
	if err := s.sqlx.SelectContext(ctx, &rows, executionsSQL, j.ID, historyFloor(j.ID)); err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	out := make([]domain.Execution, 0, len(rows)+1)
	for _, r := range rows {
		finished, dur := r.FinishedAt, r.DurationMS
		out = append(out, domain.Execution{
			JobID: r.JobID, Seq: r.Seq, Attempt: r.Attempt, WorkerID: r.WorkerID,
			StartedAt: r.StartedAt, FinishedAt: &finished, Outcome: domain.Outcome(r.Outcome),
			Error: scrubbed(r.Error), DurationMS: &dur,
		})
	}
	if j.Status == jobs.StateRunning && j.StartedAt != nil {
		worker := ""
		if j.WorkerID != nil {
			worker = *j.WorkerID
		}
		out = append(out, domain.Execution{
			JobID: j.ID, Seq: j.Executions, Attempt: j.Attempt, WorkerID: worker,
			StartedAt: *j.StartedAt, Outcome: domain.OutcomeRunning,
		})
	}
	return out, nil
}
