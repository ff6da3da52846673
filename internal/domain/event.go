package domain

import (
	"slices"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// Event announces that a job changed state. Events are published after the
// change commits, at most once: a subscriber that missed some (a dropped
// connection, a transport outage) resynchronises from the API.
type Event struct {
	JobID uuid.UUID `json:"job_id"`
	// Status is the job's state after the change.
	Status  jobs.State `json:"status"`
	Type    string     `json:"type"`
	Queue   string     `json:"queue"`
	Attempt int        `json:"attempt"`
	// At is when the change committed; zero on ready-queue re-scores,
	// which are not state changes.
	At time.Time `json:"at"`
	// Progress and ProgressMessage are a running job's latest progress,
	// on the events its heartbeat announces.
	Progress        *int    `json:"progress,omitempty"`
	ProgressMessage *string `json:"progress_message,omitempty"`
	// EffectivePriority and RunAt let the Redis ready queue score queued
	// jobs; they are not part of the published JSON.
	EffectivePriority float64   `json:"-"`
	RunAt             time.Time `json:"-"`
	// BatchID is the batch the job is a member of. On a batch's own
	// event (Kind EventBatch) it names the batch, whose new state is Status.
	BatchID *uuid.UUID `json:"batch_id,omitempty"`
	// Kind is "" for a job's event and EventBatch for a batch's
	// settlement (JobID then repeats the batch's id).
	Kind string `json:"kind,omitempty"`
}

// EventBatch is the Kind of a batch's settlement event.
const EventBatch = "batch"

// EventSink receives events after their changes commit. Publish must not
// block: a sink that cannot keep up drops events (and counts them).
type EventSink interface {
	// Publish announces events, in commit order; it must not keep the
	// slice after it returns.
	Publish(events []Event)
}

// EventsFromMoved turns moves into events stamped at.
func EventsFromMoved(moved []Moved, at time.Time) []Event {
	out := make([]Event, 0, len(moved))
	for _, m := range moved {
		if m.Status == "" {
			continue // lease lost: nothing changed
		}
		out = append(out, Event{JobID: m.JobID, Status: m.Status, Type: m.Type, Queue: m.Queue, Attempt: m.Attempt,
			At: at, EffectivePriority: m.EffectivePriority, RunAt: m.RunAt, BatchID: m.BatchID})
	}
	return out
}

// EventsFromJobs turns jobs into events of their current state, stamped at.
func EventsFromJobs(js []*jobs.Job, at time.Time) []Event {
	out := make([]Event, 0, len(js))
	for _, j := range js {
		out = append(out, Event{JobID: j.ID, Status: j.Status, Type: j.Type, Queue: j.Queue, Attempt: j.Attempt,
			At: at, EffectivePriority: j.EffectivePriority, RunAt: j.RunAt, BatchID: j.BatchID})
	}
	return out
}

// The roles a Flint process may run (WorkerInfo.Roles).
const (
	RoleAPI       = "api"
	RoleScheduler = "scheduler"
	RoleWorkers   = "workers"
)

// RunsWorkers reports whether the registry entry w runs jobs: a remote
// worker, or a Flint process with the workers role (or from before roles
// were recorded, when only worker processes registered).
func (w WorkerInfo) RunsWorkers() bool {
	return w.Kind == WorkerRemote || len(w.Roles) == 0 || slices.Contains(w.Roles, RoleWorkers)
}

// WorkerInfo describes a live entry of the registry: a Flint process (one
// that runs workers, or only the API or the scheduler) or a remote worker.
type WorkerInfo struct {
	ID string `json:"id"`
	// Kind is WorkerProcess (a Flint process's pool) or WorkerRemote (a
	// worker pulling work over the HTTP API, in any language).
	Kind string `json:"kind"`
	// Name, Language and Version are what a remote worker said of itself
	// (Name is empty and Language "go" for a Flint process).
	Name     string `json:"name"`
	Language string `json:"language"`
	// Host is the machine (for a remote worker, the address it called
	// from); PID is zero for a remote worker.
	Host   string   `json:"host"`
	PID    int      `json:"pid"`
	Queues []string `json:"queues"`
	// Types are the job types the process has handlers for; empty means
	// it did not say (a process from before workers reported them).
	Types       []string `json:"types"`
	Concurrency int      `json:"concurrency"`
	// Roles are what a Flint process runs, of ProcessRoles (api,
	// scheduler, workers); a process that runs no workers has Concurrency
	// 0 and no queues or types. Empty for a remote worker, and for a
	// worker process of a version from before roles were recorded.
	Roles       []string  `json:"roles"`
	Version     string    `json:"version"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// State is what the worker was asked to do: WorkerRunning, WorkerQuiet
	// (stop claiming, finish what it holds) or WorkerTerminate (stop).
	State string `json:"state"`
	// Running lists the jobs whose handlers run in the worker (never more
	// than its Concurrency); Claimed counts the jobs it holds in its
	// claim-ahead buffer, claimed but not started.
	Running []RunningJob `json:"running"`
	Claimed int          `json:"claimed"`
	// KeyID is the API key that registered a remote worker (nil: the
	// bootstrap key); only that key may act as the worker.
	KeyID *uuid.UUID `json:"-"`
}

// Worker kinds and requested states.
const (
	WorkerProcess   = "process"
	WorkerRemote    = "remote"
	WorkerRunning   = "running"
	WorkerQuiet     = "quiet"
	WorkerTerminate = "terminate"
)

// RunningJob is a job a worker is running.
type RunningJob struct {
	ID        uuid.UUID `json:"id"`
	Type      string    `json:"type"`
	StartedAt time.Time `json:"started_at"`
}
