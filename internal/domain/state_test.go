package domain_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestStateMachine checks every (from, to) pair against the transitions the
// specification allows, written out here independently of the table in
// state.go so that a change to either shows up.
func TestStateMachine(t *testing.T) {
	t.Parallel()
	allowed := map[[2]jobs.State]bool{
		{jobs.StateBlocked, jobs.StateQueued}:      true, // dependencies completed
		{jobs.StateBlocked, jobs.StateScheduled}:   true, // dependencies completed, run_at later
		{jobs.StateBlocked, jobs.StateCancelled}:   true,
		{jobs.StateScheduled, jobs.StateQueued}:    true, // promoter
		{jobs.StateScheduled, jobs.StateCancelled}: true,
		{jobs.StateQueued, jobs.StateRunning}:      true, // claim by a worker that starts at once (pull, push)
		{jobs.StateQueued, jobs.StateClaimed}:      true, // claim into a pool's buffer
		{jobs.StateClaimed, jobs.StateRunning}:     true, // its handler starts
		{jobs.StateClaimed, jobs.StateQueued}:      true, // drain before it started, lease expiry
		{jobs.StateClaimed, jobs.StateCancelled}:   true, // cancelled before it started
		{jobs.StateQueued, jobs.StateCancelled}:    true,
		{jobs.StateRunning, jobs.StateCompleted}:   true,
		{jobs.StateRunning, jobs.StateScheduled}:   true, // retry with backoff
		{jobs.StateRunning, jobs.StateDeadLetter}:  true,
		{jobs.StateRunning, jobs.StateQueued}:      true, // drain, lease expiry
		{jobs.StateRunning, jobs.StateCancelled}:   true,
		{jobs.StateRunning, jobs.StateWaiting}:     true, // sleep, wait for a signal or an event
		{jobs.StateWaiting, jobs.StateQueued}:      true, // woken: time, signal, event, timeout
		{jobs.StateWaiting, jobs.StateCancelled}:   true,
		{jobs.StateDeadLetter, jobs.StateQueued}:   true, // DLQ replay
		{jobs.StateCancelled, jobs.StateBlocked}:   true, // re-armed when the dependency that cancelled it is replayed
	}
	for _, from := range jobs.States {
		for _, to := range jobs.States {
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				t.Parallel()
				require.Equal(t, allowed[[2]jobs.State{from, to}], domain.CanTransition(from, to))
			})
		}
	}
}

func TestTerminalStatesHaveNoExit(t *testing.T) {
	t.Parallel()
	for _, s := range jobs.States {
		if s == jobs.StateCompleted {
			for _, to := range jobs.States {
				require.False(t, domain.CanTransition(s, to), "%s → %s", s, to)
			}
		}
	}
}

// TestOperatorActionsFollowTheStateMachine checks that every state an
// operator action accepts leads somewhere the state machine allows.
func TestOperatorActionsFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	for _, from := range domain.CancelFrom {
		if from.Leased() {
			continue // a leased job is asked to stop; its worker moves it
		}
		require.True(t, domain.CanTransition(from, jobs.StateCancelled), "cancel from %s", from)
	}
	require.True(t, domain.CanTransition(jobs.StateRunning, jobs.StateCancelled))
	for _, from := range domain.RetryFrom {
		require.True(t, domain.CanTransition(from, jobs.StateQueued), "retry from %s", from)
	}
}
