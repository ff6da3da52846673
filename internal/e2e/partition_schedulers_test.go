package e2e

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// TestSchedulersSplitByAPartition runs two schedulers, one of them behind
// a loopback proxy that swallows every byte for longer than Flint's
// statement deadline, while a series fires every second: the scheduler
// that still reaches PostgreSQL keeps the series going alone, no
// occurrence is enqueued twice across the two halves, and once the
// network heals and the other scheduler stops, the one that was cut off
// carries the series by itself; both processes stay up throughout.
func TestSchedulersSplitByAPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	proxy, pu := dbtest.NewProxy(t, u)
	cut := startFlint(t, "scheduler", pu, "FLINT_WORKER_ID=sched-cut")
	other := startFlint(t, "scheduler", u, "FLINT_WORKER_ID=sched-other")
	startFlint(t, "worker", u, "FLINT_WORKER_ID=runner")
	cut.ready(t, 60*time.Second)
	other.ready(t, 60*time.Second)
	series := enqueueAll(t, s, jobs.EnqueueParams{Type: jobs.TypeNoop, IntervalSeconds: 1})[0]
	require.NotNil(t, series.ScheduleID)
	ran := func() int {
		var n int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs
			WHERE schedule_id = $1 AND status = 'completed'`, *series.ScheduleID).Scan(&n))
		return n
	}
	atLeast := func(n int, timeout time.Duration, what string) {
		t.Helper()
		waitUntil(t, timeout, func() (bool, string) { return ran() >= n, what })
	}
	atLeast(3, 60*time.Second, "three occurrences before the partition")

	proxy.Swallow()
	cutAt := ran()
	// Longer than the 20 s statement deadline: the cut-off scheduler's
	// statements end in errors while the other one runs the series.
	atLeast(cutAt+25, 90*time.Second, "the series to go on during the partition")
	proxy.Heal()
	require.NoError(t, other.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, other.wait(t, 30*time.Second))
	alone := ran()
	atLeast(alone+5, 60*time.Second, "the scheduler that was cut off to carry the series alone")

	var total, distinct int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*), count(DISTINCT scheduled_for) FROM jobs WHERE schedule_id = $1`,
		*series.ScheduleID).Scan(&total, &distinct))
	require.Equal(t, distinct, total, "an occurrence enqueued twice")
	t.Logf("occurrences=%d doubled=%d", total, total-distinct)
	select {
	case <-cut.done:
		t.Fatalf("the scheduler cut off by the partition exited: %v", cut.err)
	default:
	}
}
