package domain

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// ClaimParams says what a worker process wants to claim.
type ClaimParams struct {
	// WorkerID names the claiming process in the jobs it claims and their
	// executions.
	WorkerID string
	// Queues limits the claim to these queues; empty means every queue.
	Queues []string
	// Types limits the claim to jobs of these types, the ones the worker
	// has handlers for; nil means any type.
	Types []string
	// Push makes the claim the pusher's: it takes only from queues that
	// push their jobs to an endpoint (named in Queues), which every other
	// claim leaves alone.
	Push bool
	// Buffered says the claimed jobs may wait for a worker (the pool's
	// claim-ahead buffer): they are stored as claimed, not running, until
	// the pool reports their start (StartJobs, or the outcome's StartedAt).
	// A claim that starts its jobs at once (pull workers, push) leaves it
	// false.
	Buffered bool
	// Limit is the most jobs to claim at once.
	Limit int
	// LeaseTTL is how long the lease lasts before a heartbeat must extend it.
	LeaseTTL time.Duration
	// Held, when set, is filled in by a claim that came back short with
	// what flow control held back, so the pool knows when claiming again
	// can succeed. A claim that took Limit jobs leaves it zero: the pool
	// claims again as soon as a worker is free anyway.
	Held *FlowHold
}

// FlowHold is what a claim learned about the limited queues it served.
type FlowHold struct {
	// Waiting says a limited queue still has queued jobs: a slot that
	// opens (a job of it ends) may let another start.
	Waiting bool
	// RetryAfter, when positive, is when the rate limit of a queue with
	// waiting jobs next allows a start.
	RetryAfter time.Duration
}

// Lease identifies one attempt of one job: the fencing token a worker holds.
// Every write the worker makes for the attempt names it, and the store
// refuses the write once the token no longer matches.
type Lease struct {
	JobID uuid.UUID
	// Token is the lease token the claim drew for this attempt.
	Token uuid.UUID
}

// LeaseOf returns the lease a claimed job carries.
func LeaseOf(j *jobs.Job) Lease {
	l := Lease{JobID: j.ID}
	if j.LeaseToken != nil {
		l.Token = *j.LeaseToken
	}
	return l
}

// Heartbeat is a lease to extend, with the progress its handler reported
// since the last heartbeat (nil: none).
type Heartbeat struct {
	Lease
	Progress *Progress
}

// Progress is what a handler reported with ReportProgress.
type Progress struct {
	Percent int    // 0 to 100
	Message string // at most MaxProgressMessage bytes
}

// LeaseStatus is what a heartbeat learned about a lease it extended.
type LeaseStatus struct {
	JobID uuid.UUID
	// CancelRequested says an operator asked to cancel the job: the worker
	// cancels its handler's context.
	CancelRequested bool
}

// Finish is how a worker ended one attempt of one job.
type Finish struct {
	Lease
	// Outcome is succeeded, failed, cancelled or interrupted (the worker is
	// draining and hands the job back without charging the attempt).
	Outcome Outcome
	// Result is the handler's JSON result (succeeded only; nil for none).
	Result []byte
	// Error is the failure, cancellation or interruption reason.
	Error string
	// RetryDelay is the backoff before the next attempt (failed only). The
	// store decides between retry and DLQ from attempt and max_retries.
	RetryDelay time.Duration
	// Final marks a failure that no retry can fix (the handler returned
	// Permanent): the job goes to the DLQ whatever retries it has left.
	Final bool
	// Log holds lines the handler logged in this attempt that have not
	// been stored yet. They are written with the outcome, in the same
	// statement, when the lease holds; when it is lost, the worker stores
	// them through its log writer instead.
	Log []LogEntry
	// StartedAt is when the handler started, on the database's clock (the
	// claim's time plus the time the job waited in the pool), for a
	// buffered claim whose start was not written yet; nil for none.
	StartedAt *time.Time
	// EndedAt is when the handler returned, on the database's clock as
	// StartedAt is: the job's finish time and its run's length count to
	// it, not to when the outcome was written (outcomes are written in
	// batches); nil means when it is written.
	EndedAt *time.Time
	// Spawn lists jobs to add to the job's workflow with its completion
	// (succeeded only; see Spawn), each checked with CheckSpawned and the
	// list with CheckSpawnGraph. They are created in the transaction that
	// completes the job, or not at all; what the store refuses (a key the
	// workflow has, a dependency that cannot complete) fails the job for
	// good with the reason instead.
	Spawn []jobs.Spawned
	// Wait is what a suspended attempt waits for (OutcomeSuspended only),
	// and Step the sleep's step recorded with it (nil for a signal or an
	// event wait).
	Wait *jobs.WaitingFor
	Step *jobs.StepRecord
}

// Start reports that the handler of a buffered claim started, at At on the
// database's clock.
type Start struct {
	Lease
	At time.Time
}

// Moved reports a job that a write moved, with its new state. A Moved with
// an empty Status means the write was refused because the lease was lost.
type Moved struct {
	JobID  uuid.UUID
	Status jobs.State // the new state; "" when the lease was lost
	// Type, Queue and Attempt are the job's after the move, for events and
	// metrics; EffectivePriority, RunAt and CreatedAt let the Redis ready
	// queue and the scheduler's index place it.
	Type              string
	Queue             string
	Attempt           int
	EffectivePriority float64
	RunAt             time.Time
	CreatedAt         time.Time
	// BatchID is the batch the job is a member of, if any.
	BatchID *uuid.UUID
}

// LeaseLost reports whether the write was refused because the worker no
// longer held the job's lease.
func (m Moved) LeaseLost() bool { return m.Status == "" }

// Timer is a scheduled job as the scheduler's in-memory index sees it.
type Timer struct {
	ID       uuid.UUID
	Priority float64 // effective priority
	// RunAt is when the job becomes due; CreatedAt breaks ties in the
	// claim order.
	RunAt     time.Time
	CreatedAt time.Time
}

// LeaseHolder is who holds a lease: the worker (a remote worker's id, an
// in-process pool's, or a pusher's, PushWorkerID), with the job's attempt
// and queue.
type LeaseHolder struct {
	Lease
	WorkerID string
	Attempt  int
	Queue    string
	// Traceparent is the trace context the job was enqueued under ("" for
	// none) and StartedAt when the attempt's run started (nil if unknown):
	// what the spans of the attempt's steps need.
	Traceparent string
	StartedAt   *time.Time
}

// pushWorkerSuffix ends the worker id of a process's pusher: the holder
// of every lease a push delivery takes.
const pushWorkerSuffix = "/push"

// PushWorkerID is the worker id the pusher of the process named
// processID claims push jobs under.
func PushWorkerID(processID string) string { return processID + pushWorkerSuffix }

// PushDelivery reports whether a lease held by workerID was taken by a
// push delivery (PushWorkerID): an endpoint that answered 202 finishes
// such a job through the API with its lease token.
func (h LeaseHolder) PushDelivery() bool { return strings.HasSuffix(h.WorkerID, pushWorkerSuffix) }

// Claimed is what the API checks of a job a remote worker reports on.
type Claimed struct {
	// Mine says the worker claimed the job at some point: it holds its
	// lease now or held it before (a run of it was interrupted or
	// finished).
	Mine bool
	// Attempt is the job's attempt now, for the retry backoff.
	Attempt int
	// Type, Queue, Traceparent and StartedAt (when the attempt's run
	// started) describe the attempt for its span.
	Type, Queue, Traceparent string
	StartedAt                *time.Time
}

// LogFailures writes the failures among written outcomes to the process
// log at the level an operator filters by: a failure that sent its job to
// the dead-letter queue at error, one that will be retried at warn. batch
// is what was written and moved what the write reported (in any order).
func LogFailures(ctx context.Context, logger *slog.Logger, batch []Finish, moved []Moved) {
	errs := make(map[uuid.UUID]string, len(batch))
	for _, f := range batch {
		if f.Outcome == OutcomeFailed {
			errs[f.JobID] = f.Error
		}
	}
	if len(errs) == 0 {
		return
	}
	for _, m := range moved {
		msg, failed := errs[m.JobID]
		if !failed {
			continue
		}
		switch m.Status {
		case jobs.StateDeadLetter:
			logger.ErrorContext(ctx, "job failed for good: moved to the dead-letter queue", "job_id", m.JobID,
				"type", m.Type, "queue", m.Queue, "attempt", m.Attempt, "error", msg)
		case jobs.StateScheduled, jobs.StateQueued:
			logger.WarnContext(ctx, "job failed; it will be retried", "job_id", m.JobID,
				"type", m.Type, "queue", m.Queue, "attempt", m.Attempt, "retry_at", m.RunAt, "error", msg)
		}
	}
}
