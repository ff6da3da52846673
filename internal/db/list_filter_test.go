package db_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestClaimedIsToldFromRunning: a buffered claim's jobs are claimed (no
// start) until their start is written; listings, stats and the capped
// counts tell the two apart, and a job's short id finds it.
func TestClaimedIsToldFromRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var all []*jobs.Job
	for range 3 {
		all = append(all, b.enqueue(t, jobs.EnqueueParams{}))
	}
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 2, LeaseTTL: time.Minute, Buffered: true})
	require.NoError(t, err)
	require.Len(t, got, 2)
	for _, j := range got {
		require.Equal(t, jobs.StateClaimed, j.Status)
		require.Nil(t, j.StartedAt)
	}
	// A start is written as reported unless it lies ahead of the database
	// clock (then it is the clock). Write it once the clock has passed it
	// by more than the assertion's margin, so that storing the clock
	// instead of the report would show.
	at := got[0].UpdatedAt.Add(5 * time.Millisecond)
	for past := false; !past; {
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT clock_timestamp() > $1`, at.Add(10*time.Millisecond)).Scan(&past))
	}
	require.NoError(t, b.store.StartJobs(b.ctx, []domain.Start{{Lease: domain.LeaseOf(got[0]), At: at}}))
	started, err := b.store.GetJob(b.ctx, got[0].ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateRunning, started.Status)
	require.WithinDuration(t, at, *started.StartedAt, time.Millisecond, "the start as the pool reported it")

	ids := func(states ...jobs.State) []string {
		page, err := b.store.ListJobs(b.ctx, domain.ListParams{Statuses: states})
		require.NoError(t, err)
		var out []string
		for _, j := range page.Jobs {
			out = append(out, j.ID.String()+":"+string(j.Status))
		}
		return out
	}
	require.Equal(t, []string{got[1].ID.String() + ":claimed"}, ids(jobs.StateClaimed))
	require.Equal(t, []string{got[0].ID.String() + ":running"}, ids(jobs.StateRunning))
	require.Len(t, ids(jobs.StateClaimed, jobs.StateRunning), 2)
	require.Len(t, ids(jobs.StateClaimed, jobs.StateQueued), 2)
	require.Len(t, ids(), 3)

	st, err := b.store.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.ByStatus["claimed"])
	require.Equal(t, int64(1), st.ByStatus["running"])
	require.Equal(t, int64(1), st.ByStatus["queued"])
	counts, err := b.store.CappedCounts(b.ctx, []jobs.State{jobs.StateClaimed, jobs.StateRunning}, 100)
	require.NoError(t, err)
	require.Equal(t, []domain.StateCount{{State: jobs.StateClaimed, Count: 1}, {State: jobs.StateRunning, Count: 1}}, counts)

	// The eight digits the dashboard prints find the job, in either case.
	for _, q := range []string{domain.ShortID(all[2].ID), strings.ToUpper(domain.ShortID(all[2].ID))} {
		page, err := b.store.ListJobs(b.ctx, domain.ListParams{Q: q})
		require.NoError(t, err)
		require.Len(t, page.Jobs, 1, q)
		require.Equal(t, all[2].ID, page.Jobs[0].ID)
	}
}
