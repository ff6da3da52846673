package db

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

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

// parentsOfSQL gathers the parents of the claimed jobs $1 and their
// results, in rows of two kinds. An edge (job set) is one job and one
// parent: the parent's key (its step key, its id for a dependency outside
// the workflow; for a batch callback the batch, under "batch", and each
// member under its id), the parent's id (NULL for the batch) and its
// result's size; the batch's edge carries its counts itself. A result
// (job NULL) is one parent's id, size and result, once for every job of
// the claim that has it: a result many jobs share (the job that spawned a
// fan-out) is read and sent once. A result larger than
// jobs.MaxParentsBytes fits no job and is not sent; which of the others
// fit each job is readParents' to decide. Parents never move to the
// history while a job depends on them (see archiveCandidates), nor batch
// members while a callback is unfinished.
//
// Set-based, where the claim used to read each job's parents with
// subqueries of its own: those cost a claimed job of a fan-out about
// 10 µs, twice what its claim costs without them. Every table is reached
// by key whatever the planner believes of it: the claimed jobs' edges by
// their keys, and each parent, batch and member through a lateral
// subquery that OFFSET 0 keeps from being turned into a join (without
// it, a burst into a jobs table nothing has analyzed yet was planned as a
// hash join reading the whole table); parentsPlanSQL prices out the rest.
// The statement sorts nothing: the smallest-first running total that
// says which results fit each job, done here with two sorts and two
// window functions over every edge, was half of its time in a fan-out's
// claims, and is readParents' loop now.
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
), m AS MATERIALIZED (
	SELECT x.batch_id, m.id, m.result AS r, octet_length(m.result::text) AS n
	FROM (SELECT DISTINCT batch_id FROM cb) x CROSS JOIN LATERAL (
		SELECT m.id, m.result FROM jobs m WHERE m.batch_id = x.batch_id AND m.result IS NOT NULL OFFSET 0
	) m
)
SELECT e.job, p.k, p.id, p.n, NULL::jsonb FROM e JOIN p ON p.id = e.parent
UNION ALL
SELECT c.job_id, 'batch', NULL, 0, jsonb_build_object('id', b.id, 'total', b.total, 'counts', ` + batchCountsSQL + `)
FROM cb c CROSS JOIN LATERAL (SELECT b.id, b.total, b.completed, b.dead_letter, b.cancelled, b.binned FROM batches b WHERE b.id = c.batch_id OFFSET 0) b
UNION ALL
SELECT c.job_id, m.id::text, m.id, m.n, NULL FROM cb c JOIN m ON m.batch_id = c.batch_id
UNION ALL
SELECT NULL, NULL, p.id, p.n, p.r FROM p WHERE p.n <= ` + maxParentsBytesSQL + `
UNION ALL
SELECT NULL, NULL, m.id, m.n, m.r FROM m WHERE m.n <= ` + maxParentsBytesSQL

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
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*claimedRow, error) {
		r := new(claimedRow)
		return r, row.Scan(append(r.jobRow.targets(), &r.Steps, &r.Signals)...)
	})
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
	type edge struct {
		job    uuid.UUID
		key    string
		parent uuid.UUID // zero for the batch's edge, which brings its result
		bytes  int64
		result json.RawMessage
	}
	var edges []edge
	results := map[uuid.UUID]json.RawMessage{} // a parent's result, read once
	var (
		job, parent *uuid.UUID
		key         *string
		n           int64
		result      []byte
	)
	b := &pgx.Batch{}
	b.Queue(parentsPlanSQL)
	b.Queue(parentsOfSQL, ids).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&job, &key, &parent, &n, &result}, func() error {
			switch {
			case job == nil && parent != nil:
				results[*parent] = result
			case job != nil && key != nil:
				e := edge{job: *job, key: *key, bytes: n, result: result}
				if parent != nil {
					e.parent = *parent
				}
				edges = append(edges, e)
			}
			result = nil // each row's bytes are its own
			return nil
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("read parents' results: %w", err)
	}
	// Each job's results are passed smallest first (by size, then key)
	// while its running total stays within jobs.MaxParentsBytes; the rest
	// do not fit.
	slices.SortFunc(edges, func(a, b edge) int {
		return cmp.Or(bytes.Compare(a.job[:], b.job[:]), cmp.Compare(a.bytes, b.bytes), strings.Compare(a.key, b.key))
	})
	var total int64
	for i, e := range edges {
		if i == 0 || e.job != edges[i-1].job {
			total = 0
		}
		total += e.bytes
		v := e.result
		switch {
		case total > jobs.MaxParentsBytes:
			v = fmt.Appendf(nil, `{"too_large": true, "bytes": %d}`, e.bytes)
		case v == nil:
			v = results[e.parent]
		}
		if v == nil {
			return fmt.Errorf("read parents' results: job %s: no result came for %q", e.job, e.key)
		}
		if j := byID[e.job]; j != nil {
			j.Parents[e.key] = v
		}
	}
	return nil
}
