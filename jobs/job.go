package jobs

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Priorities. Lower runs first.
const (
	PriorityHigh   = 1
	PriorityMedium = 2
	PriorityLow    = 3
	// DefaultPriority is used when an enqueue request gives none.
	DefaultPriority = PriorityMedium
)

// DefaultQueue is the queue of jobs enqueued without one.
const DefaultQueue = "default"

// Job is one unit of work: a row of the jobs table. A handler receives
// the job it runs, read at the claim; it must not change it.
type Job struct {
	// ID is the job's id, a UUIDv7 unless the enqueuer chose one.
	ID uuid.UUID `json:"id"`
	// Type names the handler that runs the job.
	Type string `json:"type"`
	// Queue is the queue the job waits in.
	Queue string `json:"queue"`
	// Payload is the JSON the job was enqueued with ({} when none).
	Payload json.RawMessage `json:"payload"`
	// Priority is the priority given at enqueue: 1 (high), 2 (medium) or
	// 3 (low); lower runs first.
	Priority int `json:"priority"`
	// EffectivePriority is the priority the claim orders by: Priority,
	// lowered by aging while a medium or low job waits.
	EffectivePriority float64 `json:"effective_priority"`
	// Status is the job's state.
	Status State `json:"status"`
	// Attempt counts the attempts charged so far, the running one included.
	// Interrupted attempts (worker died, drain) are refunded.
	Attempt int `json:"attempt"`
	// MaxRetries is how many retries may follow a failed first attempt.
	MaxRetries int `json:"max_retries"`
	// Interruptions counts attempts that ended because their worker died.
	Interruptions int `json:"interruptions"`
	// Executions counts every run that was started, interrupted ones too;
	// it numbers the rows of job_executions.
	Executions int `json:"executions"`
	// RunAt is when the job is (or was) due: the time asked at enqueue, or
	// when its retry's backoff ends.
	RunAt time.Time `json:"run_at"`
	// TimeoutSeconds bounds each attempt (see Timeout); 0 means none.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// IdempotencyKey is the key the job was enqueued with, if any: another
	// enqueue with the same key returns this job instead of a new one.
	IdempotencyKey *string `json:"idempotency_key,omitempty"`
	// ConcurrencyKey groups jobs of a queue (a tenant, a customer) for the
	// queue's per-key limit and the rotation across keys.
	ConcurrencyKey *string `json:"concurrency_key,omitempty"`
	// CancelRequested says an operator asked to cancel the running job;
	// its handler's context is cancelled at the worker's next heartbeat.
	CancelRequested bool `json:"cancel_requested"`
	// LastError is the error of the last failed or interrupted attempt,
	// cut to MaxErrorLen.
	LastError *string `json:"last_error,omitempty"`
	// Result is what the handler returned, as JSON, once the job completed.
	Result json.RawMessage `json:"result,omitempty"`
	// WorkerID names the worker process that runs (or last ran) the job.
	WorkerID *string `json:"worker_id,omitempty"`
	// LeaseToken fences every write a worker makes for this attempt. It is
	// never shown outside the process that holds it.
	LeaseToken *uuid.UUID `json:"-"`
	// LeaseExpiresAt is when the running job's lease runs out unless its
	// worker renews it; the reaper takes back jobs past it.
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	// ScheduleID links an occurrence of a recurring series to the series;
	// ScheduledFor is the firing time it stands for.
	ScheduleID   *uuid.UUID `json:"schedule_id,omitempty"`
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
	// CancelledBy is the dependency whose permanent failure or cancellation
	// cancelled this job; replaying that dependency re-arms this job.
	CancelledBy *uuid.UUID `json:"cancelled_by,omitempty"`
	// Progress (0-100) and ProgressMessage are what the handler last
	// reported in this attempt (jobs.ReportProgress).
	Progress        *int    `json:"progress,omitempty"`
	ProgressMessage *string `json:"progress_message,omitempty"`
	// CreatedAt is when the job was enqueued; UpdatedAt when its row last
	// changed.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// StartedAt is when the handler of the current or last run started
	// (nil while the job is claimed but waits for a worker); FinishedAt
	// when the job reached a final state.
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// DeletedAt is set while the job is in the bin (soft-deleted).
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// BatchID is the batch the job is a member of (POST /api/v1/batches).
	BatchID *uuid.UUID `json:"batch_id,omitempty"`
	// HasParents says the job has dependencies (or is a batch callback):
	// its claim reads the results of the jobs it depends on.
	HasParents bool `json:"-"`
	// Parents holds, in a claimed job, the results of the jobs it depends
	// on, by their step keys (job ids for dependencies outside its
	// workflow); see ParentResult. Nil for jobs without dependencies and
	// outside a claim.
	Parents Parents `json:"-"`
	// Durable says the job has recorded steps, waited or been sent a
	// signal: its claim reads Steps and Signals.
	Durable bool `json:"-"`
	// WaitingFor says what a waiting job waits for (status waiting only).
	WaitingFor *WaitingFor `json:"waiting_for,omitempty"`
	// Steps holds, in a claimed job, the steps earlier attempts recorded,
	// in their order (see Step); Signals what resumed its waits, by name
	// (see WaitForSignal). Nil outside a claim.
	Steps   []StepRecord      `json:"-"`
	Signals map[string]Signal `json:"-"`
	// Traceparent is the W3C trace context of the span that enqueued the
	// job ("" when tracing was off or the enqueue carried none): every
	// attempt's span continues it (see package tracing).
	Traceparent string `json:"-"`
}

// Timeout returns the handler's time limit, or 0 for none.
func (j *Job) Timeout() time.Duration { return time.Duration(j.TimeoutSeconds) * time.Second }
