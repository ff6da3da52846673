package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// startJobsSQL records that the handlers of buffered claims started: a
// claimed job becomes running. Each row is guarded by its lease token, as
// every write of a leased job is (see finishSQL for why no condition on
// the jobs row alone may join it), and a start already written is kept.
// A start is never put after the database's now.
const startJobsSQL = `
UPDATE jobs j SET started_at = coalesce(j.started_at, least(s.at, now()))
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS s(id, token, at)
WHERE j.id = s.id AND j.lease_token = s.token
RETURNING j.id, j.type, j.queue, j.attempt, j.batch_id`

// StartJobs records the starts of buffered claims (domain.ClaimParams.
// Buffered) and announces each job as running. A start whose lease was
// lost writes nothing.
func (s *Store) StartJobs(ctx context.Context, starts []domain.Start) error {
	if len(starts) == 0 {
		return nil
	}
	ids, tokens, ats := make([]uuid.UUID, len(starts)), make([]uuid.UUID, len(starts)), make([]time.Time, len(starts))
	for i, st := range starts {
		ids[i], tokens[i], ats[i] = st.JobID, st.Token, st.At
	}
	rows, err := s.pool.Query(ctx, startJobsSQL, ids, tokens, ats)
	if err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var events []domain.Event
	for rows.Next() {
		ev := domain.Event{Status: jobs.StateRunning, At: now}
		if err := rows.Scan(&ev.JobID, &ev.Type, &ev.Queue, &ev.Attempt, &ev.BatchID); err != nil {
			return fmt.Errorf("start jobs: %w", err)
		}
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	if len(events) > 0 && s.events != nil {
		s.events.Publish(events)
	}
	return nil
}

// releaseJobsSQL hands claimed jobs back to the queue before they started,
// as if never claimed: the attempt and the execution number the claim
// took are given back, and no execution is recorded. A job whose
// cancellation was requested meanwhile is left to its worker, which
// cancels it without running it; a lease lost writes nothing.
const releaseJobsSQL = `
UPDATE jobs j SET
	status = 'queued',
	attempt = j.attempt - 1,
	executions = j.executions - 1,
	lease_token = NULL,
	lease_expires_at = NULL,
	worker_id = NULL,
	updated_at = now()
FROM unnest($1::uuid[], $2::uuid[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.started_at IS NULL AND NOT j.cancel_requested
RETURNING j.id, j.type, j.queue, j.attempt, j.effective_priority, j.run_at, j.created_at, j.batch_id`

// ReleaseJobs hands back to the queue the claimed jobs of leases whose
// handlers never started (see releaseJobsSQL), announces them and wakes
// the pools that may take them. It returns the leases it released.
func (s *Store) ReleaseJobs(ctx context.Context, leases []domain.Lease) ([]domain.Lease, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids, tokens := leaseArrays(leases)
	rows, err := s.pool.Query(ctx, releaseJobsSQL, ids, tokens)
	if err != nil {
		return nil, fmt.Errorf("release jobs: %w", err)
	}
	defer rows.Close()
	var moved []domain.Moved
	for rows.Next() {
		m := domain.Moved{Status: jobs.StateQueued}
		if err := rows.Scan(&m.JobID, &m.Type, &m.Queue, &m.Attempt, &m.EffectivePriority, &m.RunAt, &m.CreatedAt, &m.BatchID); err != nil {
			return nil, fmt.Errorf("release jobs: %w", err)
		}
		moved = append(moved, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("release jobs: %w", err)
	}
	released := make([]uuid.UUID, len(moved))
	for i, m := range moved {
		released[i] = m.JobID
	}
	s.publish(nil, moved)
	return leasesOf(leases, released), nil
}

// keepLeasesSQL keeps the jobs of the given leases that still hold them,
// after a hand-back (releaseJobsSQL) whose answer was lost: it records
// them as started (a start already written is kept), so that the
// hand-back, if it has not reached a row yet, finds its guard
// (started_at IS NULL) false there and writes nothing; a hand-back that
// has reached a row holds its lock, and this statement waits for it and
// sees what it did. A read could not settle it: the hand-back may still
// be on its way to the server, or waiting there for a CPU, when the read
// says the job is still held, and release it after that, under a job the
// worker has started on the strength of the read.
const keepLeasesSQL = `
UPDATE jobs j SET started_at = coalesce(j.started_at, now())
FROM unnest($1::uuid[], $2::uuid[]) AS l(id, token)
WHERE j.id = l.id AND j.lease_token = l.token
RETURNING j.id`

// KeepLeases returns those of leases that still hold their jobs and keeps
// them so (see keepLeasesSQL): what a caller does after a hand-back whose
// answer was lost (a timeout, a dropped connection), which may have
// committed, or may commit later.
func (s *Store) KeepLeases(ctx context.Context, leases []domain.Lease) ([]domain.Lease, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	ids, tokens := leaseArrays(leases)
	rows, err := s.pool.Query(ctx, keepLeasesSQL, ids, tokens)
	if err != nil {
		return nil, fmt.Errorf("keep leases: %w", err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("keep leases: %w", err)
	}
	return leasesOf(leases, held), nil
}

// leaseArrays lays leases out as a statement's job id and token arrays.
func leaseArrays(leases []domain.Lease) (ids, tokens []uuid.UUID) {
	ids, tokens = make([]uuid.UUID, len(leases)), make([]uuid.UUID, len(leases))
	for i, l := range leases {
		ids[i], tokens[i] = l.JobID, l.Token
	}
	return ids, tokens
}

// leasesOf returns the leases of those that the jobs ids name, in the
// order of ids.
func leasesOf(leases []domain.Lease, ids []uuid.UUID) []domain.Lease {
	byID := make(map[uuid.UUID]domain.Lease, len(leases))
	for _, l := range leases {
		byID[l.JobID] = l
	}
	out := make([]domain.Lease, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out
}
