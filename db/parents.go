package db

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/jobs"
)

// claimedSelect ends a claim whose UPDATE is the CTE "claimed" (returning
// jobColumns): it returns each leased job's columns and, for a job with
// parents (has_parents), their results (parentsSQL).
const claimedSelect = `,
parents AS (` + parentsSQL + `)
SELECT c.*, pa.parents FROM claimed c LEFT JOIN parents pa ON pa.job_id = c.id`

// parentsSQL gathers, for each claimed job with parents, their results
// as one JSON object: each dependency's result under its step key (its id
// for a dependency outside the workflow), and for a batch callback the
// batch under "batch" and each member's result under the member's id.
// Results are passed smallest first while the job's running total stays
// within jobs.MaxParentsBytes; each of the rest is {"too_large": true,
// "bytes": N}. Parents never move to the history while a job depends on
// them (see archiveCandidates), nor batch members while a callback is
// unfinished.
//
// It reads the parents of the whole claim in one pass (a correlated
// subquery per job cost three times as much: its plan restarts for every
// row), and reaches each edge and each parent through an index whatever
// the planner believes of the tables: OFFSET 0 keeps each lookup a
// subquery it cannot turn into a join. Without that, a burst into a jobs
// table nothing had analyzed yet (estimated a few thousand rows) was
// planned as a hash join reading the whole table for each claimed job.
const parentsSQL = `
	SELECT job_id, jsonb_object_agg(k, CASE WHEN fits THEN r ELSE jsonb_build_object('too_large', true, 'bytes', n) END) AS parents
	FROM (
		SELECT job_id, k, r, n,
		       sum(n) OVER (PARTITION BY job_id ORDER BY n, k ROWS UNBOUNDED PRECEDING) <= ` + maxParentsBytesSQL + ` AS fits
		FROM (
			SELECT c.id AS job_id, coalesce(p.step_key, p.id::text) AS k, coalesce(p.result, 'null'::jsonb) AS r,
			       coalesce(octet_length(p.result::text), 4) AS n
			FROM claimed c
			CROSS JOIN LATERAL (SELECT d.depends_on_id FROM job_dependencies d WHERE d.job_id = c.id OFFSET 0) d
			CROSS JOIN LATERAL (
				SELECT p.id, p.result, (SELECT s.step_key FROM workflow_steps s WHERE s.job_id = p.id) AS step_key
				FROM jobs p WHERE p.id = d.depends_on_id
				OFFSET 0
			) p
			WHERE c.has_parents
			UNION ALL
			SELECT c.id, 'batch', jsonb_build_object('id', b.id, 'total', b.total, 'counts', ` + batchCountsSQL + `), 0
			FROM claimed c JOIN batch_callbacks bc ON bc.job_id = c.id JOIN batches b ON b.id = bc.batch_id
			WHERE c.has_parents
			UNION ALL
			SELECT c.id, m.id::text, m.result, octet_length(m.result::text)
			FROM claimed c JOIN batch_callbacks bc ON bc.job_id = c.id JOIN jobs m ON m.batch_id = bc.batch_id
			WHERE c.has_parents AND m.result IS NOT NULL
		) found
	) sized
	GROUP BY job_id`

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
}

// collectClaimed scans a claim's rows (claimedSelect).
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
		out[i] = j
	}
	return out, nil
}
