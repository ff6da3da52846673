package db

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/jobs"
)

// jobColumns lists the columns every job query returns, in jobRow order.
const jobColumns = `id, type, queue, payload, priority, effective_priority, status, attempt, max_retries,
	interruptions, executions, run_at, timeout_seconds, idempotency_key, cancel_requested, last_error,
	result, worker_id, lease_token, lease_expires_at, created_at, updated_at, started_at, finished_at, deleted_at,
	schedule_id, scheduled_for, cancelled_by`

// jobRow is a jobs row as stored.
type jobRow struct {
	ID                uuid.UUID  `db:"id"`
	Type              string     `db:"type"`
	Queue             string     `db:"queue"`
	Payload           []byte     `db:"payload"`
	Priority          int16      `db:"priority"`
	EffectivePriority float64    `db:"effective_priority"`
	Status            string     `db:"status"`
	Attempt           int32      `db:"attempt"`
	MaxRetries        int32      `db:"max_retries"`
	Interruptions     int32      `db:"interruptions"`
	Executions        int32      `db:"executions"`
	RunAt             time.Time  `db:"run_at"`
	TimeoutSeconds    *int32     `db:"timeout_seconds"`
	IdempotencyKey    *string    `db:"idempotency_key"`
	CancelRequested   bool       `db:"cancel_requested"`
	LastError         *string    `db:"last_error"`
	Result            []byte     `db:"result"`
	WorkerID          *string    `db:"worker_id"`
	LeaseToken        *uuid.UUID `db:"lease_token"`
	LeaseExpiresAt    *time.Time `db:"lease_expires_at"`
	CreatedAt         time.Time  `db:"created_at"`
	UpdatedAt         time.Time  `db:"updated_at"`
	StartedAt         *time.Time `db:"started_at"`
	FinishedAt        *time.Time `db:"finished_at"`
	DeletedAt         *time.Time `db:"deleted_at"`
	ScheduleID        *uuid.UUID `db:"schedule_id"`
	ScheduledFor      *time.Time `db:"scheduled_for"`
	CancelledBy       *uuid.UUID `db:"cancelled_by"`
}

// toJob converts a row to the domain type.
func (r *jobRow) toJob() *jobs.Job {
	j := &jobs.Job{
		ID:                r.ID,
		Type:              r.Type,
		Queue:             r.Queue,
		Payload:           json.RawMessage(r.Payload),
		Priority:          int(r.Priority),
		EffectivePriority: r.EffectivePriority,
		Status:            jobs.State(r.Status),
		Attempt:           int(r.Attempt),
		MaxRetries:        int(r.MaxRetries),
		Interruptions:     int(r.Interruptions),
		Executions:        int(r.Executions),
		RunAt:             r.RunAt,
		IdempotencyKey:    r.IdempotencyKey,
		CancelRequested:   r.CancelRequested,
		LastError:         r.LastError,
		WorkerID:          r.WorkerID,
		LeaseToken:        r.LeaseToken,
		LeaseExpiresAt:    r.LeaseExpiresAt,
		CreatedAt:         r.CreatedAt,
		UpdatedAt:         r.UpdatedAt,
		StartedAt:         r.StartedAt,
		FinishedAt:        r.FinishedAt,
		DeletedAt:         r.DeletedAt,
		ScheduleID:        r.ScheduleID,
		ScheduledFor:      r.ScheduledFor,
		CancelledBy:       r.CancelledBy,
	}
	if r.TimeoutSeconds != nil {
		j.TimeoutSeconds = int(*r.TimeoutSeconds)
	}
	if len(r.Result) > 0 {
		j.Result = json.RawMessage(r.Result)
	}
	return j
}

// collectJobs scans every row of a jobColumns query.
func collectJobs(rows pgx.Rows, err error) ([]*jobs.Job, error) {
	if err != nil {
		return nil, err
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[jobRow])
	if err != nil {
		return nil, err
	}
	out := make([]*jobs.Job, len(rs))
	for i, r := range rs {
		out[i] = r.toJob()
	}
	return out, nil
}

// collectOneJob scans the single row of a jobColumns query, mapping "no
// rows" to jobs.ErrNotFound.
func collectOneJob(rows pgx.Rows, err error) (*jobs.Job, error) {
	if err != nil {
		return nil, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByPos[jobRow])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return r.toJob(), nil
}

// stateStrings converts states to the text[] SQL guards take.
func stateStrings(states []jobs.State) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}
