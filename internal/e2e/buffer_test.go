package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestBufferDoesNotHoldJobsFromIdleProcesses: two worker processes that
// have learnt their handlers are quick claim ahead into their buffers. A
// burst of six 10 s jobs ahead of 200 jobs of 1 ms leaves one process with
// every worker on a long job and its buffer full of short ones, while the
// other runs out of work. The short jobs must not wait behind the long
// ones: the busy process hands its buffer back, and the idle one takes it.
// Every short job starts before any long job ends: held in that buffer,
// one would wait for a long job to end (ten seconds, before the busy
// process learnt to hand its buffer back). How long they waited is
// logged; its bound is a speed figure, and lives in benchmarks.
func TestBufferDoesNotHoldJobsFromIdleProcesses(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	for _, id := range []string{"buffer-a", "buffer-b"} {
		startFlint(t, "worker", u, "FLINT_WORKER_ID="+id).ready(t, 60*time.Second)
	}
	// Quick handlers first: both pools learn to claim ahead.
	warm := make([]jobs.EnqueueParams, 400)
	for i := range warm {
		warm[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
	}
	waitJobs(t, s, enqueueAll(t, s, warm...), 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })

	var burst []jobs.EnqueueParams
	for range 6 {
		long := sleepJob(10_000)
		long.Priority = 1 // first in claim order
		burst = append(burst, long)
	}
	for range 200 {
		short := sleepJob(1)
		short.Priority = 3
		burst = append(burst, short)
	}
	got := enqueueAll(t, s, burst...)
	short := got[6:]
	done := waitJobs(t, s, short, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })

	var waits []time.Duration
	lastStart := time.Time{}
	for _, j := range done {
		require.NotNil(t, j.StartedAt)
		waits = append(waits, j.StartedAt.Sub(j.CreatedAt))
		if j.StartedAt.After(lastStart) {
			lastStart = *j.StartedAt
		}
		// A job handed back from a buffer goes back as if never claimed:
		// one attempt charged, one execution recorded.
		require.Equal(t, 1, j.Attempt)
		ex, err := s.ListExecutions(context.Background(), j)
		require.NoError(t, err)
		require.Len(t, ex, 1)
		require.Equal(t, domain.OutcomeSucceeded, ex[0].Outcome)
	}
	slices.Sort(waits)
	t.Logf("short jobs' waits: median %s, max %s", waits[len(waits)/2], waits[len(waits)-1])
	for _, long := range got[:6] {
		j, err := s.GetJob(context.Background(), long.ID)
		require.NoError(t, err)
		if j.FinishedAt != nil {
			require.True(t, j.FinishedAt.After(lastStart),
				"a short job started at %s, after long job %s ended at %s: it waited in a busy process's buffer", lastStart, j.ID, j.FinishedAt)
		}
	}
}
