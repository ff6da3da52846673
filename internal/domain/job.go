package domain

import (
	"time"

	"github.com/google/uuid"
)

// DefaultMaxRetries is how many retries follow a failed first attempt unless
// the job or the settings say otherwise.
const DefaultMaxRetries = 3

// DefaultMaxInterruptions is how many times a job's worker may die under it
// before the job is parked in the DLQ as a suspected poison pill.
const DefaultMaxInterruptions = 3

// Outcome is how one execution of a job ended.
type Outcome string

const (
	// OutcomeRunning marks the execution in progress (shown, never stored
	// finished).
	OutcomeRunning Outcome = "running"
	// OutcomeSucceeded means the handler returned no error: the job
	// completed.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed means the handler returned an error, panicked or timed
	// out: the job is retried or, with no retries left (or a Permanent
	// error), goes to the dead-letter queue.
	OutcomeFailed Outcome = "failed"
	// OutcomeInterrupted means the run ended without a verdict on the job
	// (a drain on shutdown, or a lease that expired): the attempt is
	// refunded and the job queued again, unless lost leases have reached
	// the interruption limit, which sends it to the dead-letter queue.
	OutcomeInterrupted Outcome = "interrupted"
	// OutcomeCancelled means the job was cancelled while it ran or waited
	// for a worker.
	OutcomeCancelled Outcome = "cancelled"
)

// Execution is one attempt to run a job: a row of job_executions.
type Execution struct {
	JobID uuid.UUID `json:"job_id"`
	// Seq numbers the job's runs from 1, interrupted ones included (the
	// job's Executions when this run was claimed).
	Seq int `json:"seq"`
	// Attempt is the attempt the run was charged as.
	Attempt  int    `json:"attempt"`
	WorkerID string `json:"worker_id"`
	// StartedAt is when the run's handler started (when it was claimed, for
	// a run handed back before it started); FinishedAt when it ended (nil
	// while it runs).
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Outcome    Outcome    `json:"outcome"`
	// Error is the run's error, if it failed or was interrupted.
	Error *string `json:"error,omitempty"`
	// DurationMS is how long the run took, in milliseconds, once ended.
	DurationMS *int64 `json:"duration_ms,omitempty"`
}
