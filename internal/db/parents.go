package db

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/jobs"
)

// claimedColumns is what a claim returns of each job it leases: its
// columns and, for a job with parents (has_parents), their results
// (parentsSQL), and for a durable job its steps and signals. A job
// without parents looks nothing up: the CASE never evaluates the
// subquery.
const claimedColumns = jobColumns + `,
	CASE WHEN j.has_parents THEN ` + parentsSQL + ` END,
	CASE WHEN j.durable THEN ` + claimedStepsSQL + ` END,
	CASE WHEN j.durable THEN ` + claimedSignalsSQL + ` END`

// parentsSQL gathers the results of the parents of the claimed job j, as
// one JSON object: each dependency's result under its step key (its id
// for a dependency outside the workflow), and for a batch callback the
// batch under "batch" and each member's result under the member's id.
// Results are passed smallest first while the running total stays within
// jobs.MaxParentsBytes; each of the rest is {"too_large": true, "bytes": N}.
// Parents never move to the history while a job depends on them (see
// archiveCandidates), nor batch members while a callback is unfinished.
//
// Each parent is reached through its primary key whatever the planner
// believes of the tables: the OFFSET 0 keeps the lookup a subquery it
// cannot turn into a join. Without it, a burst into a jobs table nothing
// has analyzed yet (estimated a few thousand rows) was planned as a hash
// join reading the whole table once per claimed job: 2 ms a job.
const parentsSQL = `(
	SELECT jsonb_object_agg(k, CASE WHEN fits THEN r ELSE jsonb_build_object('too_large', true, 'bytes', n) END)
	FROM (
		SELECT k, r, n, sum(n) OVER (ORDER BY n, k ROWS UNBOUNDED PRECEDING) <= ` + maxParentsBytesSQL + ` AS fits
		FROM (
			SELECT coalesce(p.step_key, p.id::text) AS k, coalesce(p.result, 'null'::jsonb) AS r,
			       coalesce(octet_length(p.result::text), 4) AS n
			FROM ` + parentIDsSQL + ` d CROSS JOIN LATERAL (
				SELECT p.id, p.result, (SELECT s.step_key FROM workflow_steps s WHERE s.job_id = p.id) AS step_key
				FROM jobs p WHERE p.id = d.id
				OFFSET 0
			) p
			UNION ALL
			SELECT 'batch', jsonb_build_object('id', b.id, 'total', b.total, 'counts', ` + batchCountsSQL + `), 0
			FROM batch_callbacks c JOIN batches b ON b.id = c.batch_id
			WHERE c.job_id = j.id
			UNION ALL
			SELECT m.id::text, m.result, octet_length(m.result::text)
			FROM batch_callbacks c JOIN jobs m ON m.batch_id = c.batch_id
			WHERE c.job_id = j.id AND m.result IS NOT NULL
		) found
	) sized
)`

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

// claimedRow is a claim's row: the job and its parents' results.
type claimedRow struct {
	jobRow
	Parents []byte
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
		if r.Parents != nil {
			if err := json.Unmarshal(r.Parents, &j.Parents); err != nil {
				return nil, fmt.Errorf("read parents of job %s: %w", j.ID, err)
			}
		} else if j.HasParents {
			j.Parents = jobs.Parents{}
		}
		if err := readDurable(j, r.Steps, r.Signals); err != nil {
			return nil, err
		}
		out[i] = j
	}
	return out, nil
}
