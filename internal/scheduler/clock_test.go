package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The promoter reckons the database clock through the Clock it is given
// (plus the offset it measured when loading): it fires a job when that
// clock says the job is due, and the database, whose clock guards every
// promotion, agrees. With the clock stopped, a job that fell due in the
// meantime waits; once the clock moves past its time, it is promoted.
//
// The job is enqueued after the promoter has loaded its index and made
// its first sweep, and reaches it by the scheduled-jobs notification: the
// promoter's reckoned "now" is then earlier than the job's run time
// however slowly the machine runs.
func TestPromoterFollowsItsClock(t *testing.T) {
	t.Parallel()
	store, u := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	clock := jobs.NewFakeClock(time.Now())
	p, moved, mu := startPromoter(t, store, u, PromoterConfig{
		MaxSleep:      20 * time.Millisecond,
		SweepInterval: time.Hour, // only the index, on the given clock
		Clock:         clock,
	})
	promoted := func() []domain.Moved {
		mu.Lock()
		defer mu.Unlock()
		return append([]domain.Moved(nil), *moved...)
	}
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.idx != nil && !p.sweepDue.IsZero()
	}, 10*time.Second, 10*time.Millisecond, "index loaded and first sweep made")

	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Delay: 300 * time.Millisecond})
	require.NoError(t, err)
	id := res[0].Job.ID
	require.Eventually(t, func() bool { return p.Len() == 1 }, 10*time.Second, 10*time.Millisecond, "the notification brought the job")

	// Due by the database within a second; the promoter's clock stands.
	require.Never(t, func() bool { return len(promoted()) > 0 }, time.Second, 10*time.Millisecond,
		"promoted although the promoter's clock has not moved")
	clock.Advance(time.Minute)
	p.wake()
	require.Eventually(t, func() bool { return len(promoted()) > 0 }, 10*time.Second, 10*time.Millisecond,
		"not promoted after the clock passed its run time")
	m := promoted()
	require.Len(t, m, 1)
	require.Equal(t, id, m[0].JobID)
	require.Equal(t, jobs.StateQueued, m[0].Status)
	got, err := store.GetJob(ctx, id)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, got.Status)
}
