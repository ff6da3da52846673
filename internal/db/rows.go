package db

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// jobColumns lists the columns every job query returns, in jobRow order.
const jobColumns = `id, type, queue, payload, priority, effective_priority, status, attempt, max_retries,
	interruptions, executions, run_at, timeout_seconds, idempotency_key, cancel_requested, last_error,
	result, worker_id, lease_token, lease_expires_at, created_at, updated_at, started_at, finished_at, deleted_at,
	schedule_id, scheduled_for, cancelled_by, progress, progress_message, concurrency_key, has_parents, batch_id,
	durable, wait_kind, wait_name, traceparent`

// jobRow is a jobs row as stored. It is scanned by position only (its
// fields follow jobColumns), wherever a statement returns jobs rows.
type jobRow struct {
	ID                uuid.UUID
	Type              string
	Queue             string
	Payload           []byte
	Priority          int16
	EffectivePriority float64
	Status            string
	Attempt           int32
	MaxRetries        int32
	Interruptions     int32
	Executions        int32
	RunAt             time.Time
	TimeoutSeconds    *int32
	IdempotencyKey    *string
	CancelRequested   bool
	LastError         *string
	Result            []byte
	WorkerID          *string
	LeaseToken        *uuid.UUID
	LeaseExpiresAt    *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
	StartedAt         *time.Time
	FinishedAt        *time.Time
	DeletedAt         *time.Time
	ScheduleID        *uuid.UUID
	ScheduledFor      *time.Time
	CancelledBy       *uuid.UUID
	Progress          *int16
	ProgressMessage   *string
	ConcurrencyKey    *string
	HasParents        bool
	BatchID           *uuid.UUID
	Durable           bool
	WaitKind          *string
	WaitName          *string
	Traceparent       *string
}

// targets is r's fields in jobColumns' order, for Scan. pgx's
// RowToAddrOfStructByPos finds the same by reflection for every row it
// scans, about a tenth of the worker's CPU in a fan-out's claims;
// TestJobRowTargets holds this list to the struct.
func (r *jobRow) targets() []any {
	return []any{&r.ID, &r.Type, &r.Queue, &r.Payload, &r.Priority, &r.EffectivePriority, &r.Status,
		&r.Attempt, &r.MaxRetries, &r.Interruptions, &r.Executions, &r.RunAt, &r.TimeoutSeconds,
		&r.IdempotencyKey, &r.CancelRequested, &r.LastError, &r.Result, &r.WorkerID, &r.LeaseToken,
		&r.LeaseExpiresAt, &r.CreatedAt, &r.UpdatedAt, &r.StartedAt, &r.FinishedAt, &r.DeletedAt,
		&r.ScheduleID, &r.ScheduledFor, &r.CancelledBy, &r.Progress, &r.ProgressMessage,
		&r.ConcurrencyKey, &r.HasParents, &r.BatchID, &r.Durable, &r.WaitKind, &r.WaitName, &r.Traceparent}
}

// scanJobRow scans one row of a jobColumns query.
func scanJobRow(row pgx.CollectableRow) (*jobRow, error) {
	r := new(jobRow)
	return r, row.Scan(r.targets()...)
}

// scrubbed is an error text or a progress message as Flint shows it:
// with the log file's scrubbing (logs.Scrub), which writes apply too.
// Reads apply it again for rows stored before writes did, and for text
// written by processes that do not.
func scrubbed(s *string) *string {
	if s == nil {
		return nil
	}
	if out := logs.Scrub(*s); out != *s {
		return &out
	}
	return s
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
		LastError:         scrubbed(r.LastError),
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
		ConcurrencyKey:    r.ConcurrencyKey,
		HasParents:        r.HasParents,
		BatchID:           r.BatchID,
		Durable:           r.Durable,
	}
	if r.Traceparent != nil {
		j.Traceparent = *r.Traceparent
	}
	if r.WaitKind != nil && r.WaitName != nil {
		j.WaitingFor = &jobs.WaitingFor{Kind: *r.WaitKind, Name: *r.WaitName, Until: r.RunAt}
	}
	if r.TimeoutSeconds != nil {
		j.TimeoutSeconds = int(*r.TimeoutSeconds)
	}
	if j.Status == jobs.StateRunning && r.StartedAt == nil {
		j.Status = jobs.StateClaimed // leased, its handler not started yet
	}
	if r.Progress != nil {
		p := int(*r.Progress)
		j.Progress = &p
	}
	j.ProgressMessage = scrubbed(r.ProgressMessage)
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
	rs, err := pgx.CollectRows(rows, scanJobRow)
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
// rows" to domain.ErrNotFound.
func collectOneJob(rows pgx.Rows, err error) (*jobs.Job, error) {
	if err != nil {
		return nil, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanJobRow)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.ErrNotFound
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

// textArray scans a text[] column of a read model. Before Go 1.27,
// database/sql hands Scan the driver's text form of an array ("{a,b}"),
// which pgtype parses as pgx itself would.
type textArray []string

// Scan implements sql.Scanner.
func (a *textArray) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		*a = nil
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("scan text[]: unexpected %T", src)
	}
	var out []string
	if err := pgtype.NewMap().Scan(pgtype.TextArrayOID, pgtype.TextFormatCode, b, &out); err != nil {
		return fmt.Errorf("scan text[]: %w", err)
	}
	*a = out
	return nil
}
