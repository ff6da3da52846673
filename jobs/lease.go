package jobs

import (
	"time"

	"github.com/google/uuid"
)

// ClaimParams says what a worker process wants to claim.
type ClaimParams struct {
	WorkerID string
	// Queues limits the claim to these queues; empty means every queue.
	Queues []string
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
	Token uuid.UUID
}

// LeaseOf returns the lease a claimed job carries.
func LeaseOf(j *Job) Lease {
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
	Percent int
	Message string
}

// LeaseStatus is what a heartbeat learned about a lease it extended.
type LeaseStatus struct {
	JobID           uuid.UUID
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
}

// Moved reports a job that a write moved, with its new state. A Moved with
// an empty Status means the write was refused because the lease was lost.
type Moved struct {
	JobID             uuid.UUID
	Status            State
	Type              string
	Queue             string
	Attempt           int
	EffectivePriority float64
	RunAt             time.Time
}

// LeaseLost reports whether the write was refused because the worker no
// longer held the job's lease.
func (m Moved) LeaseLost() bool { return m.Status == "" }

// Timer is a scheduled job as the scheduler's in-memory index sees it.
type Timer struct {
	ID        uuid.UUID
	Priority  float64 // effective priority
	RunAt     time.Time
	CreatedAt time.Time
}
