package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestPoolStartsJobsClaimedAheadAtTheirTime: a scheduled job the promoter
// queued ahead of its run_at is claimed into the pool's buffer at once
// and its handler starts at run_at, not before; a pool that stops while
// such a job waits hands it back unstarted, and another pool runs it.
func TestPoolStartsJobsClaimedAheadAtTheirTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type start struct {
		job *jobs.Job
		at  time.Time
	}
	started := make(chan start, 4)
	b.registry.Register("punctual", jobs.HandlerFunc(func(_ context.Context, j *jobs.Job) (any, error) {
		started <- start{j, time.Now()}
		return nil, nil
	}))
	_, stop := b.start(t, workers.Config{Workers: 2})

	at := time.Now().Add(5 * time.Second).Truncate(time.Millisecond) // as stored
	j := b.enqueue(t, "punctual", `{}`, func(p *jobs.EnqueueParams) { p.RunAt = &at })
	moved, err := b.store.PromoteIDs(b.ctx, []uuid.UUID{j.ID}, time.Minute)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	var s start
	select {
	case s = <-started:
	case <-b.ctx.Done():
		t.Fatal("the job never started")
	}
	require.True(t, s.job.UpdatedAt.Before(at), "claimed (%s) ahead of its run_at (%s)", s.job.UpdatedAt, at)
	require.False(t, s.at.Before(at), "started at %s, before its run_at %s", s.at, at)
	done := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
	require.Equal(t, 1, done.Executions, "claimed once: never handed back while it waited for its time")
	require.False(t, done.StartedAt.Before(at), "its recorded start (%s) is not before its run_at either", done.StartedAt)

	// Stopped while it waits for its time: handed back, never started.
	later := time.Now().Add(time.Hour)
	k := b.enqueue(t, "punctual", `{}`, func(p *jobs.EnqueueParams) { p.RunAt = &later })
	moved, err = b.store.PromoteIDs(b.ctx, []uuid.UUID{k.ID}, 2*time.Hour)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	b.waitFor(t, k.ID, 30*time.Second, status(jobs.StateClaimed)) // in the buffer, not started
	stop()
	back := b.waitFor(t, k.ID, 30*time.Second, status(jobs.StateQueued))
	require.Zero(t, back.Attempt, "a handed-back attempt is not charged")
	ex, err := b.store.ListExecutions(b.ctx, back)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	require.Contains(t, deref(ex[0].Error), "before the job started")
	require.True(t, back.RunAt.Equal(later.Truncate(time.Microsecond)), "its run_at is kept: %s", back.RunAt)
	require.Empty(t, started, "its handler never ran")

	// Another pool takes it, ahead of its time again, and waits.
	b.start(t, workers.Config{Workers: 1})
	b.waitFor(t, k.ID, 30*time.Second, status(jobs.StateClaimed))
	require.Empty(t, started, "an hour early, nothing started")
}
