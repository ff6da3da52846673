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
// Every short job starts within the poll interval (200 ms here) plus a
// second for claim round trips on a loaded machine (race-built binaries),
// against the ten seconds they waited in that buffer before.
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
	done := waitJobs(t, s, short, 9*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })

	const bound = 200*time.Millisecond + time.Second
	var waits []time.Duration
	for _, j := range done {
		require.NotNil(t, j.StartedAt)
		waits = append(waits, j.StartedAt.Sub(j.CreatedAt))
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
	require.Less(t, waits[len(waits)-1], bound, "a short job waited in a busy process's buffer")
}
