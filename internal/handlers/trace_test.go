package handlers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStepStartStaysInItsRun: the start a worker gives a step (its own
// clock) is kept, unless it falls before the attempt's run began or after
// the step was recorded, where a skewed clock would put it.
func TestStepStartStaysInItsRun(t *testing.T) {
	run := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	now := run.Add(10 * time.Second)
	require.Equal(t, run.Add(time.Second), stepStart(run.Add(time.Second), &run, now))
	require.Equal(t, run, stepStart(run.Add(-time.Hour), &run, now), "not before the run")
	require.Equal(t, now, stepStart(now.Add(time.Hour), &run, now), "not after it was recorded")
	require.Equal(t, run.Add(-time.Hour), stepStart(run.Add(-time.Hour), nil, now), "no run start known")
}
