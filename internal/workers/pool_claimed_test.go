package workers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestClaimedJobStartsWhenItsHandlerDoes: a job claimed into the buffer
// while the only worker is busy is claimed, not running, until its handler
// starts; its started_at and its run's duration count from that start, not
// from the claim, so the time it waited in the buffer is not counted as
// run time.
func TestClaimedJobStartsWhenItsHandlerDoes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var warm []*jobs.Job
	for range 20 { // teach the pool that handlers are quick: it claims ahead
		warm = append(warm, b.enqueue(t, jobs.TypeNoop, `{}`))
	}
	b.start(t, workers.Config{Workers: 1})
	for _, j := range warm {
		b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
	}
	first := b.enqueue(t, jobs.TypeSleep, `{"ms": 1500}`)
	b.waitFor(t, first.ID, 30*time.Second, status(jobs.StateRunning))
	ahead := b.enqueue(t, jobs.TypeSleep, `{"ms": 200}`)
	b.waitFor(t, ahead.ID, 30*time.Second, status(jobs.StateClaimed))
	b.waitFor(t, ahead.ID, 30*time.Second, status(jobs.StateCompleted))

	f, err := b.store.GetJob(b.ctx, first.ID)
	require.NoError(t, err)
	a, err := b.store.GetJob(b.ctx, ahead.ID)
	require.NoError(t, err)
	require.NotNil(t, a.StartedAt)
	require.False(t, a.StartedAt.Before(f.FinishedAt.Add(-100*time.Millisecond)),
		"started %s, but the only worker was busy until %s", a.StartedAt, f.FinishedAt)
	took := a.FinishedAt.Sub(*a.StartedAt)
	require.Less(t, took, time.Second, "took counts the handler's 200 ms, not the wait in the buffer")
	require.GreaterOrEqual(t, took, 150*time.Millisecond)
	ex, err := b.store.ListExecutions(b.ctx, a)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Less(t, *ex[0].DurationMS, int64(1000))
	require.WithinDuration(t, *a.StartedAt, ex[0].StartedAt, time.Millisecond)
}
