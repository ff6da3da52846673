package db

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/jobs"
)

// claimedColumns is what a claim returns of each job it leases: its
// columns and, for a durable job, its steps and signals. A job that has
// parents (has_parents) gets their results from readParents, for the
// whole claim at once.
const claimedColumns = jobColumns + `,
	CASE WHEN j.durable THEN ` + claimedStepsSQL + ` END,
	CASE WHEN j.durable THEN ` + claimedSignalsSQL + ` END`

// parentsOfSQL gathers the parents' results of the claimed jobs $1, one
// row per job and parent: the job, the parent's key (its step key, its
// id for a dependency outside the workflow; for a batch callback the
// batch, under "batch", and each member's result under the member's id),
// the parent's id (NULL for the batch), its result's size, whether it
// fits, and the result itself. Each job's results are passed smallest
// first while its running total stays within jobs.MaxParentsBytes; the
// rest do not fit. A result many jobs share (the job that spawned a
// fan-out) is read once and sent once: only the first fitting row of each
// parent carries it, and readParents hands the others the same bytes.
// Parents never move to the history while a job depends on them (see
// archiveCandidates), nor batch members while a callback is unfinished.
//
// Set-based, where the claim used to read each job's parents with
// subqueries of its own: those cost a claimed job of a fan-out about
// 10 µs, twice what its claim costs without them; this costs about 4.
// Every table is reached by key whatever the planner believes of it: the
// claimed jobs' edges by their keys, and each parent, batch and member
// through a lateral subquery that OFFSET 0 keeps from being turned into
// a join (without it, a burst into a jobs table nothing has analyzed yet
// was planned as a hash join reading the whole table); parentsPlanSQL
// prices out the rest.
const parentsOfSQL = `
WITH e AS MATERIALIZED (
	SELECT d.job_id AS job, d.depends_on_id AS parent FROM job_dependencies d WHERE d.job_id = ANY($1::uuid[])
	UNION ALL
	SELECT c.job_id, c.spawned_by FROM workflow_steps c WHERE c.job_id = ANY($1::uuid[]) AND c.reads_spawner
), p AS MATERIALIZED (
	SELECT p.id, coalesce(p.step_key, p.id::text) AS k, coalesce(p.result, 'null'::jsonb) AS r,
	       coalesce(octet_length(p.result::text), 4) AS n
	FROM (SELECT DISTINCT parent FROM e) x CROSS JOIN LATERAL (
		SELECT p.id, p.result, (SELECT s.step_key FROM workflow_steps s WHERE s.job_id = p.id) AS step_key
		FROM jobs p WHERE p.id = x.parent
		OFFSET 0
	) p
), cb AS MATERIALIZED (
	SELECT c.job_id, c.batch_id FROM batch_callbacks c WHERE c.job_id = ANY($1::uuid[])
), found AS (
	SELECT e.job, p.id, p.k, p.r, p.n FROM e JOIN p ON p.id = e.parent
	UNION ALL
	SELECT c.job_id, NULL, 'batch', jsonb_build_object('id', b.id, 'total', b.total, 'counts', ` + batchCountsSQL + `), 0
	FROM cb c CROSS JOIN LATERAL (SELECT b.id, b.total, b.completed, b.dead_letter, b.cancelled, b.binned FROM batches b WHERE b.id = c.batch_id OFFSET 0) b
	UNION ALL
	SELECT c.job_id, m.id, m.id::text, m.result, octet_length(m.result::text)
	FROM cb c CROSS JOIN LATERAL (
		SELECT m.id, m.result FROM jobs m WHERE m.batch_id = c.batch_id AND m.result IS NOT NULL OFFSET 0
	) m
), sized AS (
	SELECT job, id, k, r, n,
	       sum(n) OVER (PARTITION BY job ORDER BY n, k ROWS UNBOUNDED PRECEDING) <= ` + maxParentsBytesSQL + ` AS fits
	FROM found
)
SELECT job, k, id, n, fits,
       CASE WHEN fits AND (id IS NULL OR row_number() OVER (PARTITION BY id, fits) = 1) THEN r END
FROM sized`

// parentIDsSQL is the ids of the jobs that job j depends on, as a
// subquery with one column, id: its dependency edges, and its spawner when
// it reads it (workflow_steps.reads_spawner, which a spawned job's
// dependency on its spawner is recorded as: see readsSpawner). A statement
// about one given job names it j with (SELECT $1::uuid AS id) j.
const parentIDsSQL = `(SELECT d.depends_on_id AS id FROM job_dependencies d WHERE d.job_id = j.id
	UNION ALL
	SELECT c.spawned_by FROM workflow_steps c WHERE c.job_id = j.id AND c.reads_spawner)`

// childIDsSQL is the ids of the jobs that depend on job j, as a subquery
// with one column, id: parentIDsSQL read the other way.
const childIDsSQL = `(SELECT d.job_id AS id FROM job_dependencies d WHERE d.depends_on_id = j.id
	UNION ALL
	SELECT c.job_id FROM workflow_steps c WHERE c.spawned_by = j.id AND c.reads_spawner)`

// batchCountsSQL is the members of batch b by state, as a JSON object
// without zero counts: the finished ones from its counters, the others
// read from jobs (they are never in the history).
const batchCountsSQL = `(
	SELECT coalesce(jsonb_object_agg(st, n), '{}') FROM (
		SELECT m.status AS st, count(*) AS n FROM jobs m
		WHERE m.batch_id = b.id AND m.deleted_at IS NULL AND m.status NOT IN ('completed', 'dead_letter', 'cancelled')
		GROUP BY m.status
		UNION ALL SELECT 'completed', b.completed
		UNION ALL SELECT 'dead_letter', b.dead_letter
		UNION ALL SELECT 'cancelled', b.cancelled
		UNION ALL SELECT 'binned', b.binned
	) c WHERE n > 0
)`

// maxParentsBytesSQL is jobs.MaxParentsBytes as SQL text (a test holds
// them equal).
const maxParentsBytesSQL = "4194304"

// claimedRow is a claim's row: the job, and a durable job's steps and
// signals.
type claimedRow struct {
	jobRow
	Steps   []byte
	Signals []byte
}

// collectClaimed scans a claim's rows (claimedColumns).
func collectClaimed(rows pgx.Rows, err error) ([]*jobs.Job, error) {
	if err != nil {
		return nil, err
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[claimedRow])
	if err != nil {
		return nil, err
	}
	out := make([]*jobs.Job, len(rs))
	for i, r := range rs {
		j := r.toJob()
		if err := readDurable(j, r.Steps, r.Signals); err != nil {
			return nil, err
		}
		out[i] = j
	}
	return out, nil
}

// parentsPlanSQL has the statements after it in the same transaction (a
// pipeline) run with a generic plan, made once per connection, that
// reads no table from end to end. parentsOfSQL took 0.5 ms to plan at
// each call, as long as it took to run for a claim of 100. A generic
// plan made while the tables were empty would keep sequential scans once
// they hold millions of rows, so those are priced out (TestParentsOfPlan);
// the joins of its small intermediate sets stay the planner's choice.
const parentsPlanSQL = `SELECT set_config('jit', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('enable_seqscan', 'off', true)`

// readParents gives each of the claimed jobs that has parents their
// results (parentsOfSQL), in one statement for them all, planned once
// per connection (parentsPlanSQL).
func (s *Store) readParents(ctx context.Context, claimed []*jobs.Job) error {
	byID := map[uuid.UUID]*jobs.Job{}
	var ids []uuid.UUID
	for _, j := range claimed {
		if j.HasParents {
			j.Parents = jobs.Parents{}
			byID[j.ID] = j
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	type parentRow struct {
		job    uuid.UUID
		key    string
		parent *uuid.UUID
		bytes  int64
		fits   bool
		result []byte
	}
	var found []parentRow
	var r parentRow
	results := map[uuid.UUID]json.RawMessage{} // a parent's result, read once
	b := &pgx.Batch{}
	b.Queue(parentsPlanSQL)
	b.Queue(parentsOfSQL, ids).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&r.job, &r.key, &r.parent, &r.bytes, &r.fits, &r.result}, func() error {
			if r.fits && r.result != nil && r.parent != nil {
				results[*r.parent] = r.result
			}
			found = append(found, r)
			r.result = nil // each row's bytes are its own
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("read parents' results: %w", err)
	}
	for _, f := range found {
		var v json.RawMessage
		switch {
		case !f.fits:
			v = fmt.Appendf(nil, `{"too_large": true, "bytes": %d}`, f.bytes)
		case f.result != nil:
			v = f.result
		case f.parent != nil:
			v = results[*f.parent]
		}
		if v == nil {
			return fmt.Errorf("read parents' results: job %s: no result came for %q", f.job, f.key)
		}
		if j := byID[f.job]; j != nil {
			j.Parents[f.key] = v
		}
	}
	return nil
}
