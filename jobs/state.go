package jobs

import "slices"

// State is a job's position in its lifecycle. The values match the CHECK
// constraint on jobs.status character for character.
type State string

const (
	// StateQueued jobs are due and wait to be claimed. The worker pool moves
	// them to claimed (or, for a worker that starts what it claims at once,
	// to running); the API can cancel them.
	StateQueued State = "queued"
	// StateScheduled jobs wait for run_at (delayed jobs and retries). The
	// promoter moves them to queued; the API can cancel them or run them now.
	StateScheduled State = "scheduled"
	// StateBlocked jobs wait for their dependencies. Dependency release moves
	// them to queued or scheduled; a failed dependency cancels them.
	StateBlocked State = "blocked"
	// StateClaimed jobs hold a lease and wait in a worker pool's claim-ahead
	// buffer for a free worker: claimed, not started. In the database a
	// claimed job is a running row whose started_at is still NULL (see
	// ARCHITECTURE, "Claimed is not running"); the pool moves it to running
	// when its handler starts, or hands it back (queued) or cancels it
	// without running it.
	StateClaimed State = "claimed"
	// StateRunning jobs hold a lease and run in a worker. The worker pool
	// moves them to completed, scheduled, dead_letter, cancelled or (on
	// drain) queued; the reaper moves those whose lease expired.
	StateRunning State = "running"
	// StateWaiting jobs ended an attempt by sleeping or waiting for a
	// signal or an event (jobs.Sleep, jobs.WaitForSignal): they hold no
	// worker until the promoter (at the wake time or timeout) or the
	// signal moves them to queued. The API can cancel them.
	StateWaiting State = "waiting"
	// StateCompleted is terminal: the handler succeeded.
	StateCompleted State = "completed"
	// StateDeadLetter jobs failed for good and sit in the DLQ until replayed
	// by an operator, which moves them to queued.
	StateDeadLetter State = "dead_letter"
	// StateCancelled is terminal, with one exception: a job cancelled
	// because a dependency failed goes back to blocked when an operator
	// replays that dependency from the DLQ.
	StateCancelled State = "cancelled"
)

// States lists every state in lifecycle order.
var States = []State{
	StateBlocked, StateScheduled, StateQueued, StateClaimed, StateRunning, StateWaiting,
	StateCompleted, StateDeadLetter, StateCancelled,
}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Terminal reports whether the job is finished: no component moves it out
// of s on its own (only an operator's replay can).
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateDeadLetter || s == StateCancelled
}

// Leased reports whether a job in s holds a lease: claimed or running. A
// leased job is stopped by asking its worker (cancel_requested), not at
// once.
func (s State) Leased() bool { return s == StateClaimed || s == StateRunning }

// Stored is the value of jobs.status that holds s: a claimed job is stored
// as running with no started_at yet.
func (s State) Stored() State {
	if s == StateClaimed {
		return StateRunning
	}
	return s
}

// Waiting reports whether a job in s is not running and can be
// cancelled at once: it has not started yet, or it sleeps or waits
// between runs.
func (s State) Waiting() bool {
	return s == StateQueued || s == StateScheduled || s == StateBlocked || s == StateWaiting
}
