package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// jobParentsSQL reads the parents of job $1 for its page: results over
// $2 bytes are left out (their size says so).
const jobParentsSQL = `
SELECT coalesce(s.step_key, p.id::text), p.id, p.type, p.status,
       CASE WHEN octet_length(p.result::text) <= $2 THEN p.result END, coalesce(octet_length(p.result::text), 0)
FROM (SELECT $1::uuid AS id) j CROSS JOIN LATERAL ` + parentIDsSQL + ` d JOIN jobs p ON p.id = d.id
LEFT JOIN workflow_steps s ON s.job_id = p.id
ORDER BY 1
LIMIT $3`

// jobSpawnedSQL reads the jobs job $1 spawned, in the order it listed
// them (their ids are UUIDv7s made in that order), with their total.
const jobSpawnedSQL = `
SELECT s.step_key, j.id, j.type, j.status, count(*) OVER ()
FROM workflow_steps s JOIN jobs j ON j.id = s.job_id
WHERE s.spawned_by = $1
ORDER BY s.job_id
LIMIT $2`

// jobOriginSQL reads who spawned job $1 and which batch it is a callback
// of.
const jobOriginSQL = `
SELECT (SELECT spawned_by FROM workflow_steps WHERE job_id = $1),
       (SELECT batch_id FROM batch_callbacks WHERE job_id = $1),
       (SELECT kind FROM batch_callbacks WHERE job_id = $1)`

// JobData returns what job j received (its parents' results) and added
// (the jobs it spawned), and where it came from, for its page.
func (s *Store) JobData(ctx context.Context, j *jobs.Job) (domain.JobData, error) {
	d := domain.JobData{BatchID: j.BatchID}
	var kind *string
	if err := s.pool.QueryRow(ctx, jobOriginSQL, j.ID).Scan(&d.SpawnedBy, &d.CallbackOf, &kind); err != nil {
		return d, fmt.Errorf("read job data: %w", err)
	}
	if kind != nil {
		d.CallbackKind = *kind
	}
	if j.HasParents {
		rows, err := s.pool.Query(ctx, jobParentsSQL, j.ID, domain.MaxParentShown, jobs.MaxDependencies)
		if err != nil {
			return d, fmt.Errorf("read job data: %w", err)
		}
		d.Parents, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.ParentRef, error) {
			var r domain.ParentRef
			var status string
			err := row.Scan(&r.Key, &r.ID, &r.Type, &status, &r.Result, &r.Bytes)
			r.Status = jobs.State(status)
			return r, err
		})
		if err != nil {
			return d, fmt.Errorf("read job data: %w", err)
		}
	}
	rows, err := s.pool.Query(ctx, jobSpawnedSQL, j.ID, domain.MaxSpawnedShown)
	if err != nil {
		return d, fmt.Errorf("read job data: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r domain.SpawnedRef
		var status string
		if err := rows.Scan(&r.Key, &r.ID, &r.Type, &status, &d.SpawnedTotal); err != nil {
			return d, fmt.Errorf("read job data: %w", err)
		}
		r.Status = jobs.State(status)
		d.Spawned = append(d.Spawned, r)
	}
	return d, rows.Err()
}
