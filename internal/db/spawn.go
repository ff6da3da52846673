package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Growing a workflow: a job that completes with jobs to spawn (see
// jobs.Spawn) completes in a transaction of its own, which also creates
// them. The spawned jobs therefore exist if and only if the completion
// commits: a lost lease writes neither, a crash before the commit neither,
// and the retry that follows spawns them once.

// errSpawnLeaseLost ends a spawning completion whose lease was lost; it
// never leaves finishSpawning.
var errSpawnLeaseLost = errors.New("lease lost")

// finishSpawning completes f, which carries jobs to spawn, and creates
// them, in one transaction. A spawn the store refuses (a key the workflow
// has, a dependency that cannot complete) is returned as a
// *jobs.ValidationError with nothing written; lost reports a lease that
// was no longer held (nothing written either).
func (s *Store) finishSpawning(ctx context.Context, f domain.Finish) (moved domain.Moved, cascaded []domain.Moved, spawned []jobs.Enqueued, err error) {
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		in := newFinishInput([]domain.Finish{f})
		br := tx.SendBatch(ctx, in.batch())
		done, err := readFinished(br, 1)
		if err == nil {
			cascaded, err = in.readCascaded(br)
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("finish jobs: %w", cerr)
		}
		if err != nil {
			return err
		}
		m, ok := done[f.Lease]
		if !ok {
			return errSpawnLeaseLost
		}
		moved = m
		spawned, err = graft(ctx, tx, f.JobID, f.Spawn)
		return err
	})
	if errors.Is(err, errSpawnLeaseLost) {
		return domain.Moved{JobID: f.JobID}, nil, nil, nil
	}
	if err != nil {
		return domain.Moved{}, nil, nil, err
	}
	return moved, cascaded, spawned, nil
}

// spawnerWorkflowSQL reads the workflow of a job that spawns: the one its
// step belongs to, or none (the job then starts a workflow named by its
// own id).
const spawnerWorkflowSQL = `SELECT workflow_id FROM workflow_steps WHERE job_id = $1`

// workflowKeysSQL reads which of the keys $2 name jobs of workflow $1.
const workflowKeysSQL = `SELECT step_key, job_id FROM workflow_steps WHERE workflow_id = $1 AND step_key = ANY($2::text[])`

// graft creates the jobs spawner spawns, in its workflow, through q (the
// transaction that completed it).
func graft(ctx context.Context, q DBTX, spawner uuid.UUID, list []jobs.Spawned) ([]jobs.Enqueued, error) {
	var wf *uuid.UUID
	if err := q.QueryRow(ctx, spawnerWorkflowSQL, spawner).Scan(&wf); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("spawn: read workflow: %w", err)
	}
	workflow := spawner
	if wf != nil {
		workflow = *wf
	}
	ids := make(map[string]uuid.UUID, len(list))
	keys := make([]string, 0, len(list))
	for _, sp := range list {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("spawn: new id: %w", err)
		}
		ids[sp.Key] = id
		keys = append(keys, sp.Key)
	}
	var outside []string
	for _, sp := range list {
		for _, d := range sp.DependsOn {
			if _, in := ids[d]; !in && d != jobs.Self {
				outside = append(outside, d)
			}
		}
	}
	// A spawner outside any workflow starts one named by its own id: no
	// key can be taken there but by an earlier spawn of the same job (a
	// replay), which the key index refuses below; reading 10,000 keys to
	// learn that none is taken cost a fan-out 7 ms of PostgreSQL's time.
	existing := map[string]uuid.UUID{}
	if wf != nil || len(outside) > 0 {
		var err error
		if existing, err = workflowKeys(ctx, q, workflow, append(outside, keys...)); err != nil {
			return nil, err
		}
	}
	params := make([]jobs.EnqueueParams, len(list))
	for i, sp := range list {
		if _, taken := existing[sp.Key]; taken {
			return nil, jobs.Invalid(fmt.Sprintf("spawn[%d].key", i), "%q already names a job of this workflow", sp.Key)
		}
		p := sp.Params
		p.ID, p.StepKey, p.WorkflowID, p.SpawnedBy = ids[sp.Key], sp.Key, workflow, spawner
		p.DependsOn = make([]uuid.UUID, len(sp.DependsOn))
		for k, d := range sp.DependsOn {
			id, spawned := ids[d]
			switch {
			case d == jobs.Self:
				id = spawner
			case !spawned:
				var known bool
				if id, known = existing[d]; !known {
					return nil, jobs.Invalid(fmt.Sprintf("spawn[%d].depends_on[%d]", i, k),
						"%q is neither a key spawned with it, a key of this workflow nor %s", d, jobs.Self)
				}
			}
			p.DependsOn[k] = id
		}
		params[i] = p
	}
	out, err := enqueueTx(ctx, q, params...)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "workflow_steps_key_idx" {
		// Another job of the workflow spawned one of these keys meanwhile,
		// or (unread above) an earlier spawn of this job did.
		return nil, jobs.Invalid("spawn", "a key of this spawn already names a job of the workflow (%s)", pgErr.Detail)
	}
	return out, err
}

// workflowKeys maps those of keys that name jobs of workflow to their ids.
func workflowKeys(ctx context.Context, q DBTX, workflow uuid.UUID, keys []string) (map[string]uuid.UUID, error) {
	rows, err := q.Query(ctx, workflowKeysSQL, workflow, keys)
	if err != nil {
		return nil, fmt.Errorf("spawn: read workflow keys: %w", err)
	}
	defer rows.Close()
	out := map[string]uuid.UUID{}
	for rows.Next() {
		var k string
		var id uuid.UUID
		if err := rows.Scan(&k, &id); err != nil {
			return nil, fmt.Errorf("spawn: read workflow keys: %w", err)
		}
		out[k] = id
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("spawn: read workflow keys: %w", err)
	}
	return out, nil
}
