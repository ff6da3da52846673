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

// DefaultMaxRetries is how many retries follow a failed first attempt unless
// the job or the settings say otherwise.
const DefaultMaxRetries = 3

// DefaultMaxInterruptions is how many times a job's worker may die under it
// before the job is parked in the DLQ as a suspected poison pill.
const DefaultMaxInterruptions = 3

// Job is one unit of work: a row of the jobs table.
type Job struct {
	ID                uuid.UUID       `json:"id"`
	Type              string          `json:"type"`
	Queue             string          `json:"queue"`
	Payload           json.RawMessage `json:"payload"`
	Priority          int             `json:"priority"`
	EffectivePriority float64         `json:"effective_priority"`
	Status            State           `json:"status"`
	// Attempt counts the attempts charged so far, the running one included.
	// Interrupted attempts (worker died, drain) are refunded.
	Attempt    int `json:"attempt"`
	MaxRetries int `json:"max_retries"`
	// Interruptions counts attempts that ended because their worker died.
	Interruptions int `json:"interruptions"`
	// Executions counts every run that was started, interrupted ones too;
	// it numbers the rows of job_executions.
	Executions     int       `json:"executions"`
	RunAt          time.Time `json:"run_at"`
	TimeoutSeconds int       `json:"timeout_seconds,omitempty"`
	IdempotencyKey *string   `json:"idempotency_key,omitempty"`
	// ConcurrencyKey groups jobs of a queue (a tenant, a customer) for the
	// queue's per-key limit and the rotation across keys.
	ConcurrencyKey  *string         `json:"concurrency_key,omitempty"`
	CancelRequested bool            `json:"cancel_requested"`
	LastError       *string         `json:"last_error,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	WorkerID        *string         `json:"worker_id,omitempty"`
	// LeaseToken fences every write a worker makes for this attempt. It is
	// never shown outside the process that holds it.
	LeaseToken     *uuid.UUID `json:"-"`
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
	Progress        *int       `json:"progress,omitempty"`
	ProgressMessage *string    `json:"progress_message,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	StartedAt       *time.Time `json:"started_at,omitempty"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	DeletedAt       *time.Time `json:"deleted_at,omitempty"`
}

// Timeout returns the handler's time limit, or 0 for none.
func (j *Job) Timeout() time.Duration { return time.Duration(j.TimeoutSeconds) * time.Second }

// Outcome is how one execution of a job ended.
type Outcome string

const (
	// OutcomeRunning marks the execution in progress (shown, never stored
	// finished).
	OutcomeRunning     Outcome = "running"
	OutcomeSucceeded   Outcome = "succeeded"
	OutcomeFailed      Outcome = "failed"
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeCancelled   Outcome = "cancelled"
)

// Execution is one attempt to run a job: a row of job_executions.
type Execution struct {
	JobID      uuid.UUID  `json:"job_id"`
	Seq        int        `json:"seq"`
	Attempt    int        `json:"attempt"`
	WorkerID   string     `json:"worker_id"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Outcome    Outcome    `json:"outcome"`
	Error      *string    `json:"error,omitempty"`
	DurationMS *int64     `json:"duration_ms,omitempty"`
}
