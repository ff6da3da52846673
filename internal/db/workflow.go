package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Dependency release and cascade. Each is a pure function of the current
// states (recomputed, not counted), so running one twice, or for a job that
// another process finished, is harmless.

// releaseBody moves blocked candidates whose every dependency has completed
// to queued (or scheduled when their run_at is still ahead); the caller
// wakes their workers once it has committed. A released job's run_at becomes the release time, so aging
// counts its wait from when it could first run.
const releaseBody = `
moved AS (
	UPDATE jobs c SET
		status = CASE WHEN c.run_at > now() THEN 'scheduled' ELSE 'queued' END,
		run_at = greatest(c.run_at, now()),
		updated_at = now()
	WHERE c.id = ANY (ARRAY(SELECT cid FROM candidates)) AND c.status = 'blocked'
	  AND NOT EXISTS (
		SELECT 1 FROM job_dependencies x JOIN jobs p ON p.id = x.depends_on_id
		WHERE x.job_id = c.id AND p.status <> 'completed')
	RETURNING c.id, c.status, c.type, c.queue, c.attempt, c.run_at, c.effective_priority, c.created_at, c.batch_id
)
SELECT ` + movedColumns + ` FROM moved`

// releaseSQL releases the given blocked jobs if they are ready.
const releaseSQL = `WITH candidates AS (SELECT DISTINCT unnest($1::uuid[]) AS cid),` + releaseBody

// childrenOfCompleted selects the dependents of the given jobs that have
// completed. Every finish that completes jobs runs it (through
// lockChildrenSQL and releaseChildrenSQL), almost always for jobs nobody
// depends on, so it starts from job_dependencies and reads jobs only by
// key, for the edges found (a lateral subquery with a LIMIT, which the
// planner cannot turn into a join); the statements around it reach the
// children by key too (= ANY of an array). Written as joins, a plan made
// while the statistics said almost nothing had completed or was blocked
// (a drain's first finishes) read the jobs table from end to end, at
// every finish of the connection.
const childrenOfCompleted = `
	SELECT DISTINCT d.job_id AS cid
	FROM job_dependencies d CROSS JOIN LATERAL (
		SELECT 1 FROM jobs p WHERE p.id = d.depends_on_id AND p.status = 'completed' LIMIT 1
	) done
	WHERE d.depends_on_id = ANY($1::uuid[])`

// lockChildrenSQL locks the blocked dependents of jobs that just completed,
// in id order. Two dependencies of one job completing at once then take
// turns on the child, and the second sees the first's completion when it
// recomputes (a later statement, a fresh snapshot); without the lock each
// could miss the other and leave the child blocked for ever.
const lockChildrenSQL = `
SELECT c.id FROM jobs c
WHERE c.id = ANY (ARRAY(` + childrenOfCompleted + `)) AND c.status = 'blocked'
ORDER BY c.id
FOR UPDATE OF c`

// releaseChildrenSQL releases the ready dependents of jobs that completed.
const releaseChildrenSQL = `WITH candidates AS (` + childrenOfCompleted + `),` + releaseBody

// cascadeSQL cancels every job downstream (transitively) of the given jobs
// that ended dead_letter or cancelled, recording which job and why, so that
// replaying that job can re-arm them. Downstream jobs are necessarily still
// blocked: they wait for the job that failed.
const cascadeSQL = `
WITH RECURSIVE roots AS (
	SELECT id, status FROM jobs WHERE id = ANY($1::uuid[]) AND status IN ('dead_letter', 'cancelled')
),
down(id, root, why) AS (
	SELECT d.job_id, r.id, r.status FROM job_dependencies d JOIN roots r ON d.depends_on_id = r.id
	UNION
	SELECT d.job_id, down.root, down.why FROM job_dependencies d JOIN down ON d.depends_on_id = down.id
),
targets AS (
	SELECT DISTINCT ON (id) id, root, why FROM down ORDER BY id, root
),
moved AS (
	UPDATE jobs j SET
		status = 'cancelled',
		cancelled_by = t.root,
		finished_at = now(),
		updated_at = now(),
		last_error = format('cancelled: dependency %s %s', t.root,
			CASE t.why WHEN 'dead_letter' THEN 'failed permanently' ELSE 'was cancelled' END)
	FROM targets t
	WHERE j.id = t.id AND j.status = 'blocked'
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.effective_priority, j.run_at, j.created_at, j.batch_id
)
SELECT ` + movedColumns + ` FROM moved`

// rearmSQL puts the jobs that the given (just replayed) jobs' failure
// cancelled back to waiting on their dependencies.
const rearmSQL = `
WITH moved AS (
	UPDATE jobs SET status = 'blocked', cancelled_by = NULL, finished_at = NULL, last_error = NULL, updated_at = now()
	WHERE cancelled_by = ANY($1::uuid[]) AND status = 'cancelled'
	RETURNING id, status, type, queue, attempt, effective_priority, run_at, created_at, batch_id
)
SELECT ` + movedColumns + ` FROM moved`

// Cascade cancels what depends on the given jobs, where they ended
// dead_letter or cancelled.
func cascade(ctx context.Context, q DBTX, ids []uuid.UUID) ([]domain.Moved, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := collectMoved(q.Query(ctx, cascadeSQL, ids))
	if err != nil {
		return nil, fmt.Errorf("cancel downstream jobs: %w", err)
	}
	return out, nil
}

type dependencyRow struct {
	ID     uuid.UUID `db:"id"`
	Type   string    `db:"type"`
	Status string    `db:"status"`
	Total  int       `db:"total"`
}

const upstreamSQL = `
SELECT p.id, p.type, p.status, 0 AS total
FROM (SELECT $1::uuid AS id) j CROSS JOIN LATERAL ` + parentIDsSQL + ` d JOIN jobs p ON p.id = d.id
ORDER BY p.id`

const downstreamSQL = `
SELECT c.id, c.type, c.status, count(*) OVER () AS total
FROM (SELECT $1::uuid AS id) j CROSS JOIN LATERAL ` + childIDsSQL + ` d JOIN jobs c ON c.id = d.id
ORDER BY c.id LIMIT $2`

// Dependencies returns the jobs a job waits for (upstream) and the jobs
// waiting for it (downstream).
func (s *Store) Dependencies(ctx context.Context, id uuid.UUID) (domain.Dependencies, error) {
	var up, down []dependencyRow
	if err := s.sqlx.SelectContext(ctx, &up, upstreamSQL, id); err != nil {
		return domain.Dependencies{}, fmt.Errorf("read dependencies: %w", err)
	}
	if err := s.sqlx.SelectContext(ctx, &down, downstreamSQL, id, jobs.MaxDependencies); err != nil {
		return domain.Dependencies{}, fmt.Errorf("read dependencies: %w", err)
	}
	conv := func(rows []dependencyRow) []domain.DependencyRef {
		out := make([]domain.DependencyRef, len(rows))
		for i, r := range rows {
			out[i] = domain.DependencyRef{ID: r.ID, Type: r.Type, Status: jobs.State(r.Status)}
		}
		return out
	}
	d := domain.Dependencies{Upstream: conv(up), Downstream: conv(down)}
	if len(down) > 0 {
		d.DownstreamTotal = down[0].Total
	}
	return d, nil
}
