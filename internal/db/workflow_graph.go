package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// insertStepsSQL records step keys of jobs this transaction created: none
// has a row yet, so there is no conflict to look for (a key another job
// of the workflow holds is refused by workflow_steps_key_idx).
const insertStepsSQL = `
INSERT INTO workflow_steps (job_id, step_key, workflow_id, spawned_by, reads_spawner)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::uuid[], $5::boolean[])`

// stepRow is one workflow_steps row that insertSteps writes.
type stepRow struct {
	job, workflow, spawner uuid.UUID // uuid.Nil: NULL
	key                    string
	reads                  bool
}

// insertSteps records the step keys of the jobs this enqueue created, in
// their workflows (with the job that spawned them, if one did, and whether
// it reads that job's result: see readsSpawner); a job that already
// existed (by its idempotency key) keeps its own. In a transaction, a
// batch of copyMin rows or more is copied (copySteps): a fan-out's step
// rows through insertStepsSQL's arrays cost as much as its jobs did.
func insertSteps(ctx context.Context, q DBTX, params []jobs.EnqueueParams, out []jobs.Enqueued, readsSpawner []bool) error {
	var rows []stepRow
	for i := range params {
		if out[i].Inserted && params[i].StepKey != "" {
			rows = append(rows, stepRow{job: out[i].Job.ID, key: params[i].StepKey, workflow: params[i].WorkflowID,
				spawner: params[i].SpawnedBy, reads: readsSpawner != nil && readsSpawner[i]})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	var err error
	if tx, ok := q.(pgx.Tx); ok && len(rows) >= copyMin {
		err = copySteps(ctx, tx, rows)
	} else {
		err = insertStepRows(ctx, q, rows)
	}
	if err != nil {
		return fmt.Errorf("enqueue: record step keys: %w", err)
	}
	return nil
}

// insertStepRows writes rows through insertStepsSQL.
func insertStepRows(ctx context.Context, q DBTX, rows []stepRow) error {
	ids := make([]uuid.UUID, len(rows))
	keys := make([]string, len(rows))
	workflows := make([]*uuid.UUID, len(rows))
	spawners := make([]*uuid.UUID, len(rows))
	reads := make([]bool, len(rows))
	opt := func(id *uuid.UUID) *uuid.UUID {
		if *id == uuid.Nil {
			return nil
		}
		return id
	}
	for i := range rows {
		r := &rows[i]
		ids[i], keys[i], reads[i] = r.job, r.key, r.reads
		workflows[i], spawners[i] = opt(&r.workflow), opt(&r.spawner)
	}
	_, err := q.Exec(ctx, insertStepsSQL, ids, keys, workflows, spawners, reads)
	return err
}

// workflowReachSQL walks the dependency edges from $1 in both directions,
// breadth first, and stops at $2 jobs: UNION drops the jobs already
// reached (so the walk ends), the outer LIMIT ends the recursion early,
// and each job contributes at most $2 neighbours either way, so a job
// waited on by thousands costs no more than the bound.
const workflowReachSQL = `
WITH RECURSIVE reach(id) AS (
	SELECT $1::uuid
	UNION
	SELECT n.id FROM reach r CROSS JOIN LATERAL (
		(SELECT d.depends_on_id AS id FROM job_dependencies d WHERE d.job_id = r.id LIMIT $2)
		UNION ALL
		(SELECT d.job_id FROM job_dependencies d WHERE d.depends_on_id = r.id LIMIT $2)
		UNION ALL
		(SELECT s.spawned_by FROM workflow_steps s WHERE s.job_id = r.id AND s.spawned_by IS NOT NULL)
		UNION ALL
		(SELECT s.job_id FROM workflow_steps s WHERE s.spawned_by = r.id LIMIT $2)
	) n
)
SELECT r.id, coalesce(s.step_key, ''), j.type, j.status
FROM (SELECT id, row_number() OVER () AS n FROM (SELECT id FROM reach LIMIT $2) l) r
JOIN jobs j ON j.id = r.id
LEFT JOIN workflow_steps s ON s.job_id = r.id
ORDER BY r.n`

// workflowEdgesSQL reads the edges among jobs $1: dependencies, and a
// spawner's link to a job it added, which is a dependency when the job
// reads it (reads_spawner, or an edge recorded before that column).
const workflowEdgesSQL = `
SELECT job_id, depends_on_id, false FROM job_dependencies
WHERE job_id = ANY($1) AND depends_on_id = ANY($1)
UNION ALL
SELECT s.job_id, s.spawned_by, NOT s.reads_spawner FROM workflow_steps s
WHERE s.job_id = ANY($1) AND s.spawned_by = ANY($1)
  AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.job_id = s.job_id AND d.depends_on_id = s.spawned_by)
ORDER BY 1, 2`

// WorkflowGraph returns the workflow job id belongs to: every job
// connected to it through dependencies or spawns, nearest first, at most
// domain.MaxGraphSteps of them, with the edges between them. A job without
// dependencies either way is a workflow of one.
func (s *Store) WorkflowGraph(ctx context.Context, id uuid.UUID) (domain.WorkflowGraph, error) {
	rows, err := s.pool.Query(ctx, workflowReachSQL, id, domain.MaxGraphSteps+1)
	if err != nil {
		return domain.WorkflowGraph{}, fmt.Errorf("read workflow: %w", err)
	}
	var g domain.WorkflowGraph
	for rows.Next() {
		var st domain.WorkflowStep
		var status string
		if err := rows.Scan(&st.ID, &st.Key, &st.Type, &status); err != nil {
			rows.Close()
			return domain.WorkflowGraph{}, fmt.Errorf("read workflow: %w", err)
		}
		st.Status = jobs.State(status)
		g.Steps = append(g.Steps, st)
	}
	if err := rows.Err(); err != nil {
		return domain.WorkflowGraph{}, fmt.Errorf("read workflow: %w", err)
	}
	g.Complete = len(g.Steps) <= domain.MaxGraphSteps
	if !g.Complete {
		g.Steps = g.Steps[:domain.MaxGraphSteps]
	}
	if len(g.Steps) < 2 {
		return g, nil
	}
	ids := make([]uuid.UUID, len(g.Steps))
	for i, st := range g.Steps {
		ids[i] = st.ID
	}
	rows, err = s.pool.Query(ctx, workflowEdgesSQL, ids)
	if err != nil {
		return domain.WorkflowGraph{}, fmt.Errorf("read workflow edges: %w", err)
	}
	for rows.Next() {
		var e domain.WorkflowEdge
		if err := rows.Scan(&e.Job, &e.DependsOn, &e.Spawned); err != nil {
			rows.Close()
			return domain.WorkflowGraph{}, fmt.Errorf("read workflow edges: %w", err)
		}
		g.Edges = append(g.Edges, e)
	}
	if err := rows.Err(); err != nil {
		return domain.WorkflowGraph{}, fmt.Errorf("read workflow edges: %w", err)
	}
	return g, nil
}
