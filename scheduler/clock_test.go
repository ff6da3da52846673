package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// The promoter reckons the database clock through the Clock it is given
// (plus the offset it measured when loading): it fires a job when that
// clock says the job is due, and the database, whose clock guards every
// promotion, agrees. With the clock stopped, a job that fell due in the
// meantime waits; once the clock moves past its time, it is promoted.
//
// The job is enqueued after the promoter has loaded its index and made
// its first sweep, and reaches it as the scheduled-jobs notification
// does: the promoter's reckoned "now" is then earlier than the job's run
// time however slowly the machine runs.
func TestPromoterFollowsItsClock(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	clock := jobs.NewFakeClock(time.Now())
	moved := make(chan jobs.Moved, 10)
	p := NewPromoter(PromoterConfig{
		MaxSleep:      20 * time.Millisecond,
		SweepInterval: time.Hour, // only the index, on the given clock
		Clock:         clock,
		OnMoved: func(m []jobs.Moved) {
			for _, x := range m {
				moved <- x
			}
		},
	}, store, quiet())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.idx != nil && !p.sweepDue.IsZero()
	}, 10*time.Second, 10*time.Millisecond, "index loaded and first sweep made")

	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Delay: 300 * time.Millisecond})
	require.NoError(t, err)
	id := res[0].Job.ID
	timers, err := store.ScheduledTimers(ctx, []uuid.UUID{id}, uuid.Nil, 0)
	require.NoError(t, err)
	require.Len(t, timers, 1)
	tm := timers[0]
	p.Notify(fmt.Sprintf("%s %d %v %d", tm.ID, tm.RunAt.UnixMilli(), tm.Priority, tm.CreatedAt.UnixMicro()))
	require.Equal(t, 1, p.Len(), "the notified job is in the index")

	// Due by the database within a second; the promoter's clock stands.
	select {
	case m := <-moved:
		t.Fatalf("promoted %s although the promoter's clock has not moved", m.JobID)
	case <-time.After(time.Second):
	}
	clock.Advance(time.Minute)
	p.wake()
	select {
	case m := <-moved:
		require.Equal(t, id, m.JobID)
		require.Equal(t, jobs.StateQueued, m.Status)
	case <-time.After(10 * time.Second):
		t.Fatal("not promoted after the clock passed its run time")
	}
	got, err := store.GetJob(ctx, id)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, got.Status)
}
