package domain

import (
	"errors"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// Batches: a set of jobs (its members) with callback jobs that Flint
// enqueues when the set settles. A batch is open while members may be
// added; once closed, it settles when every member has finished
// (completed, dead-lettered, cancelled or binned): on_complete then fires
// whatever the outcomes, on_success when every member completed (also
// later, if dead members are replayed and complete), and on_death fires at
// the first member that reaches the dead-letter queue. Each callback is
// enqueued once, in the transaction that settles the batch (or kills its
// first member), and reads the batch's counts and its members' results
// as its parents (BatchOf, ParentResult by member id).

// Callback kinds.
const (
	OnSuccess  = "on_success"
	OnComplete = "on_complete"
	OnDeath    = "on_death"
)

// CallbackKinds lists the callback kinds in the order pages show them.
var CallbackKinds = []string{OnSuccess, OnComplete, OnDeath}

// Batch states, as GET /api/v1/batches/{id} reports them. A batch is open
// until closed; then running while any member is unfinished; then
// succeeded (every member completed), dead (a member is in the
// dead-letter queue) or completed (every member finished otherwise). A
// replayed member makes a settled batch running again until it finishes.
const (
	BatchOpen      = "open"
	BatchRunning   = "running"
	BatchSucceeded = "succeeded"
	BatchCompleted = "completed"
	BatchDead      = "dead"
)

// Callback statuses besides a fired callback's job status: not fired yet,
// or never to fire (the batch settled without meeting its condition).
const (
	CallbackPending = "pending"
	CallbackSkipped = "skipped"
)

// MaxBatchMembers bounds a batch's members over all its requests.
const MaxBatchMembers = 1_000_000

// ErrBatchClosed is returned for members added to a closed batch.
var ErrBatchClosed = errors.New("the batch is closed: no members can be added")

// BatchParams describes a batch to create.
type BatchParams struct {
	// ID is the new batch's id; zero means a fresh UUIDv7.
	ID uuid.UUID
	// Open keeps the batch open for more members (AddToBatch) until
	// CloseBatch; otherwise it is closed with this request.
	Open bool
	// Jobs are its first members (validated as enqueues; no idempotency
	// keys, no recurrence).
	Jobs []jobs.EnqueueParams
	// Callbacks maps a callback kind to the job it enqueues (validated as
	// an enqueue; no dependencies, no schedule, no idempotency key).
	Callbacks map[string]jobs.EnqueueParams
}

// Batch is a batch as the API and the dashboard show it.
type Batch struct {
	ID    uuid.UUID `json:"id"`
	State string    `json:"state"`
	// Total counts the members; Counts splits them by job status (with
	// "binned" for members in the bin), leaving out zeros.
	Total     int                      `json:"total"`
	Counts    map[string]int           `json:"counts"`
	Callbacks map[string]BatchCallback `json:"callbacks"`
	CreatedAt time.Time                `json:"created_at"`
	ClosedAt  *time.Time               `json:"closed_at"`
	SettledAt *time.Time               `json:"settled_at"`
	DiedAt    *time.Time               `json:"died_at"`
}

// BatchCallback is one callback of a batch: the job it enqueues (its id is
// fixed when the batch is created) and its status, the job's once fired,
// else CallbackPending or CallbackSkipped.
type BatchCallback struct {
	ID      uuid.UUID  `json:"id"`
	Type    string     `json:"type"`
	Queue   string     `json:"queue"`
	Status  string     `json:"status"`
	FiredAt *time.Time `json:"fired_at"`
}

// Finished counts the members that have finished (or sit in the bin).
func (b *Batch) Finished() int {
	return b.Counts[string(jobs.StateCompleted)] + b.Counts[string(jobs.StateDeadLetter)] +
		b.Counts[string(jobs.StateCancelled)] + b.Counts["binned"]
}

// BatchPage is one page of batches, newest first.
type BatchPage struct {
	Batches    []Batch
	NextCursor string
}
