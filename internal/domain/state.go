package domain

import (
	"slices"

	"github.com/flinthq/flint/jobs"
)

// transitions is the state machine: for each state, the states a job may
// move to from it. The db package builds its SQL guards from this table, and
// the tests check both against every (from, to) pair.
var transitions = map[jobs.State][]jobs.State{
	jobs.StateBlocked:   {jobs.StateQueued, jobs.StateScheduled, jobs.StateCancelled},
	jobs.StateScheduled: {jobs.StateQueued, jobs.StateCancelled},
	jobs.StateQueued:    {jobs.StateClaimed, jobs.StateRunning, jobs.StateCancelled},
	// A claimed job starts, or goes back (drain, lease expiry) or is
	// cancelled without running.
	jobs.StateClaimed: {jobs.StateRunning, jobs.StateQueued, jobs.StateCancelled},
	// A running job ends, or goes back, or sleeps or waits for a signal
	// or an event.
	jobs.StateRunning:    {jobs.StateCompleted, jobs.StateScheduled, jobs.StateDeadLetter, jobs.StateQueued, jobs.StateCancelled, jobs.StateWaiting},
	jobs.StateWaiting:    {jobs.StateQueued, jobs.StateCancelled},
	jobs.StateCompleted:  nil,
	jobs.StateDeadLetter: {jobs.StateQueued},
	// A job cancelled because a dependency failed is re-armed (back to
	// waiting on its dependencies) when that dependency is replayed.
	jobs.StateCancelled: {jobs.StateBlocked},
}

// CanTransition reports whether the state machine allows from → to.
func CanTransition(from, to jobs.State) bool {
	return slices.Contains(transitions[from], to)
}

// InitialStates are the states a job can be created in.
var InitialStates = []jobs.State{jobs.StateQueued, jobs.StateScheduled, jobs.StateBlocked}

// Operator actions and the states each accepts. Each is a subset of what the
// state machine allows for its target state; the tests check that, and the
// db package uses these sets as its SQL guards.
var (
	// CancelFrom: waiting jobs are cancelled at once; running jobs are asked
	// to stop and are cancelled by their worker at the next checkpoint.
	CancelFrom = []jobs.State{jobs.StateBlocked, jobs.StateScheduled, jobs.StateQueued, jobs.StateWaiting, jobs.StateClaimed, jobs.StateRunning}
	// RetryFrom: a dead-letter job is replayed with its attempts reset; a
	// scheduled job (typically waiting out a retry backoff) runs now.
	RetryFrom = []jobs.State{jobs.StateScheduled, jobs.StateDeadLetter}
)
