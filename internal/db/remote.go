package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Remote workers pull work over the HTTP API. They claim, heartbeat and
// finish through the same statements as in-process pools (ClaimJobs,
// ExtendLeases, FinishJobs), under the same lease tokens; what is here is
// what only they need: their registry entry, an operator's request to
// quiet or stop them, and the checks the API makes on their requests.

const getWorkerSQL = `
SELECT id, host, pid, queues, types, concurrency, version, started_at, heartbeat_at, kind, name, language, key_id, requested_state
FROM workers WHERE id = $1`

// GetWorker returns a registered worker, or domain.ErrNotFound.
func (s *Store) GetWorker(ctx context.Context, id string) (domain.WorkerInfo, error) {
	var rows []workerRow
	if err := s.sqlx.SelectContext(ctx, &rows, getWorkerSQL, id); err != nil {
		return domain.WorkerInfo{}, fmt.Errorf("get worker: %w", err)
	}
	if len(rows) == 0 {
		return domain.WorkerInfo{}, fmt.Errorf("no such worker: %w", domain.ErrNotFound)
	}
	return rows[0].info(), nil
}

// remoteHeartbeatSQL is upsertWorkerSQL for a remote worker: it refreshes
// the entry only while it exists, so that a heartbeat racing the worker's
// deregistration cannot bring it back.
const remoteHeartbeatSQL = `
WITH w AS (
	UPDATE workers SET heartbeat_at = now() WHERE id = $1 AND kind = 'remote'
	RETURNING requested_state
),
served AS (
	INSERT INTO job_types_served (type, last_seen_at, worker_id)
	SELECT t, now(), $1 FROM unnest($2::text[]) AS t WHERE EXISTS (SELECT 1 FROM w)
	ON CONFLICT (type) DO UPDATE SET last_seen_at = now(), worker_id = excluded.worker_id
	WHERE job_types_served.last_seen_at < now() - interval '1 minute'
)
SELECT requested_state FROM w`

// RemoteWorkerHeartbeat records a registered remote worker's heartbeat
// (valid for ttl) and returns what an operator asked of it, as
// WorkerHeartbeat does; a worker that is not registered (any more) is
// domain.ErrNotFound and is not added.
func (s *Store) RemoteWorkerHeartbeat(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) (string, error) {
	types := w.Types
	if types == nil {
		types = []string{}
	}
	var state string
	err := s.pool.QueryRow(ctx, remoteHeartbeatSQL, w.ID, types).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("no such worker: %w", domain.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("worker heartbeat: %w", err)
	}
	w.State = state
	s.publishWorker(ctx, w, ttl)
	return state, nil
}

const setWorkerStateSQL = `
UPDATE workers SET requested_state = $2 WHERE id = $1 AND kind = 'remote'
  AND NOT (requested_state = 'terminate' AND $2 = 'quiet')
RETURNING id`

// SetWorkerState asks a remote worker to keep running, quiet down (stop
// claiming, finish what it holds) or terminate; it learns on its next
// heartbeat. Quieting a worker already asked to terminate changes
// nothing. A worker that is not a remote one is domain.ErrNotFound.
func (s *Store) SetWorkerState(ctx context.Context, id, state string) error {
	switch state {
	case domain.WorkerRunning, domain.WorkerQuiet, domain.WorkerTerminate:
	default:
		return jobs.Invalid("state", "must be running, quiet or terminate")
	}
	var got string
	err := s.pool.QueryRow(ctx, setWorkerStateSQL, id, state).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, gerr := s.GetWorker(ctx, id); gerr != nil {
			return gerr
		}
		if state == domain.WorkerQuiet {
			return nil // asked to terminate already
		}
		return fmt.Errorf("worker %s is a Flint process; stop it as you started it: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("set worker state: %w", err)
	}
	return nil
}

const workerLeasesSQL = `SELECT id, lease_token FROM jobs WHERE status = 'running' AND worker_id = $1 AND lease_token IS NOT NULL`

// ReleaseWorker hands every job a worker holds back to its queue without
// charging the attempt (a clean stop is not a crash), then removes the
// worker from the registry. It returns the jobs it moved.
func (s *Store) ReleaseWorker(ctx context.Context, id, reason string) ([]domain.Moved, error) {
	rows, err := s.pool.Query(ctx, workerLeasesSQL, id)
	if err != nil {
		return nil, fmt.Errorf("release worker: %w", err)
	}
	var batch []domain.Finish
	for rows.Next() {
		var l domain.Lease
		if err := rows.Scan(&l.JobID, &l.Token); err != nil {
			rows.Close()
			return nil, fmt.Errorf("release worker: %w", err)
		}
		batch = append(batch, domain.Finish{Lease: l, Outcome: domain.OutcomeInterrupted, Error: reason})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("release worker: %w", err)
	}
	var moved []domain.Moved
	if len(batch) > 0 {
		finished, cascaded, err := s.FinishJobs(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("release worker: %w", err)
		}
		for _, m := range finished {
			if !m.LeaseLost() {
				moved = append(moved, m)
			}
		}
		moved = append(moved, cascaded...)
	}
	if err := s.DeregisterWorker(ctx, id); err != nil {
		return moved, err
	}
	return moved, nil
}

const claimedBySQL = `
SELECT j.id, j.attempt,
       j.worker_id IS NOT DISTINCT FROM $2 OR EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = j.id AND e.worker_id = $2),
       j.type, j.queue, coalesce(j.traceparent, ''), j.started_at
FROM jobs j WHERE j.id = ANY($1::uuid[])`

// ClaimedBy says, of the jobs ids that still exist in the live table,
// which the worker has claimed and at which attempt they stand. A job
// that is not in the result left the live table (archived, purged).
func (s *Store) ClaimedBy(ctx context.Context, workerID string, ids []uuid.UUID) (map[uuid.UUID]domain.Claimed, error) {
	rows, err := s.pool.Query(ctx, claimedBySQL, ids, workerID)
	if err != nil {
		return nil, fmt.Errorf("check claims: %w", err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID]domain.Claimed, len(ids))
	for rows.Next() {
		var id uuid.UUID
		var c domain.Claimed
		if err := rows.Scan(&id, &c.Attempt, &c.Mine, &c.Type, &c.Queue, &c.Traceparent, &c.StartedAt); err != nil {
			return nil, fmt.Errorf("check claims: %w", err)
		}
		out[id] = c
	}
	return out, rows.Err()
}

const leaseHolderSQL = `SELECT attempt, coalesce(worker_id, ''), queue, coalesce(traceparent, ''), started_at
FROM jobs WHERE id = $1 AND lease_token = $2`

// LeaseHolder says who holds the lease l names (the worker, the job's
// attempt and queue), or domain.ErrLeaseLost when it holds none (the job
// finished, was reaped or re-claimed, or the token is wrong).
func (s *Store) LeaseHolder(ctx context.Context, l domain.Lease) (domain.LeaseHolder, error) {
	h := domain.LeaseHolder{Lease: l}
	err := s.pool.QueryRow(ctx, leaseHolderSQL, l.JobID, l.Token).Scan(&h.Attempt, &h.WorkerID, &h.Queue, &h.Traceparent, &h.StartedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, domain.ErrLeaseLost
	}
	if err != nil {
		return h, fmt.Errorf("check lease: %w", err)
	}
	return h, nil
}

// ExtendLeasesWithin is ExtendLeases for workers Flint cannot watch: a
// lease of a job that has run past its timeout plus grace is not
// extended (it is lost, and the reaper returns the job), so a worker
// whose handler hangs cannot hold a job for ever. Only leases that
// holder holds are extended (the others are reported lost): a worker
// cannot keep, or write progress to, a job another worker holds even
// with its lease token.
func (s *Store) ExtendLeasesWithin(ctx context.Context, beats []domain.Heartbeat, ttl, grace time.Duration, holder string) ([]domain.LeaseStatus, error) {
	return s.extendLeases(ctx, beats, ttl, &grace, &holder)
}
