//go:build chaos

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// TestChaosPartition is make chaos's partition part: for
// FLINT_CHAOS_DURATION it cuts one half of Flint (an API, a scheduler and a
// worker behind a loopback proxy) off PostgreSQL again and again, each time
// for FLINT_CHAOS_PARTITION (3m unless set), the proxy alternately
// swallowing every byte and stalling, while the other half carries on,
// the mixed load goes to both APIs and a series fires every second. Both
// halves run at Flint's default timings (30 s lease). In each round the
// cut-off API answers 503 with Retry-After, the jobs the cut-off worker
// held are re-run by the other worker, and, that worker stopped before the
// network heals, the cut-off half recovers alone: its worker runs jobs and
// its API answers 201 within 30 s of the heal. At the end every enqueue
// answered 201 has completed exactly once, nothing is left running, no
// occurrence of the series was enqueued twice and no process exited.
//
//flint:long a chaos scenario: setup, rounds, tally, read best top to bottom
func TestChaosPartition(t *testing.T) {
	duration := chaosDuration(t)
	hold := chaosPartition(t)
	u := dbtest.NewDatabase(t)
	proxy, pu := dbtest.NewProxy(t, u)
	direct := startHalf(t, u, "direct")
	cut := startHalf(t, pu, "cut")
	s := openStore(t, u) // checks go around the proxy
	direct.store = s
	series := enqueueAll(t, s, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "series", IntervalSeconds: 1})[0]
	require.NotNil(t, series.ScheduleID)
	directLoad, cutLoad := startAPILoad(direct, 1), startAPILoad(cut, 1)
	directLoad.waitAcked(t, time.Now(), 30*time.Second)
	cutLoad.waitAcked(t, time.Now(), 30*time.Second)

	ctx := context.Background()
	var rescued, ranAfterHeal []time.Duration
	begin := time.Now()
	for round := 1; time.Since(begin) < duration; round++ {
		mode := []string{"swallow", "stall"}[(round-1)%2]
		var held []uuid.UUID
		waitUntil(t, 60*time.Second, func() (bool, string) {
			rows, err := s.Pool().Query(ctx, `SELECT id FROM jobs WHERE status = 'running' AND worker_id = 'cut-worker'`)
			require.NoError(t, err)
			held, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			require.NoError(t, err)
			return len(held) > 0, "the cut-off worker to hold jobs when the partition begins"
		})
		busy := cutLoad.count(http.StatusServiceUnavailable)
		if mode == "swallow" {
			proxy.Swallow()
		} else {
			proxy.Stall()
		}
		cutAt := time.Now()
		waitFor(t, 60*time.Second, "the cut-off API to answer 503", func() bool {
			return cutLoad.count(http.StatusServiceUnavailable) > busy
		})
		answered := time.Since(cutAt)
		directLoad.waitAcked(t, time.Now(), 30*time.Second)
		waitUntil(t, 3*time.Minute, func() (bool, string) {
			var done int
			require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+everyJobSQL+` j
				WHERE id = ANY($1) AND status = 'completed'`, held).Scan(&done))
			return done == len(held), fmt.Sprintf("the %d jobs the cut-off worker held to be re-run by the other", len(held))
		})
		rescued = append(rescued, time.Since(cutAt))
		time.Sleep(time.Until(cutAt.Add(hold))) // the scenario: the partition lasts hold
		direct.requireAllUp(t)
		cut.requireAllUp(t)

		// The other worker stops: the cut-off one must recover alone.
		other := direct.procs["worker"]
		delete(direct.procs, "worker")
		require.NoError(t, other.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, other.wait(t, 60*time.Second))
		proxy.Heal()
		healed := time.Now()
		waitUntil(t, 30*time.Second, func() (bool, string) {
			var n int
			require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs
				WHERE worker_id = 'cut-worker' AND status = 'completed' AND finished_at > $1`, healed).Scan(&n))
			return n > 0, "the cut-off worker to finish a job within 30 s of the heal"
		})
		ranAfterHeal = append(ranAfterHeal, time.Since(healed))
		cutLoad.waitAcked(t, healed, 30*time.Second)
		t.Logf("round %d, %s for %s: 503 from the cut-off API after %s, its worker's %d jobs re-run after %s, it ran a job %s after the heal, its API answered 201 %s after",
			round, mode, healed.Sub(cutAt).Round(time.Second), answered.Round(time.Millisecond), len(held),
			rescued[len(rescued)-1].Round(time.Millisecond), ranAfterHeal[len(ranAfterHeal)-1].Round(time.Millisecond),
			cutLoad.lastAcked().Sub(healed).Round(time.Millisecond))
		direct.procs["worker"] = startFlint(t, "worker", u, halfEnv(fmt.Sprintf("direct-worker-%d", round))...)
		direct.procs["worker"].ready(t, 60*time.Second)
	}

	acked := append(directLoad.finish(), cutLoad.finish()...)
	tally := direct.settle(t, acked, 5*time.Minute)
	occurrences, doubledOccurrences := seriesTally(t, s, *series.ScheduleID)
	slices.Sort(rescued)
	slices.Sort(ranAfterHeal)
	t.Logf("chaos over %s: %d partitions of %s; held jobs re-run after a median %s, max %s; the cut-off worker ran a job after the heal: median %s, max %s",
		time.Since(begin).Round(time.Second), len(rescued), hold, rescued[len(rescued)/2].Round(time.Millisecond), rescued[len(rescued)-1].Round(time.Millisecond),
		ranAfterHeal[len(ranAfterHeal)/2].Round(time.Millisecond), ranAfterHeal[len(ranAfterHeal)-1].Round(time.Millisecond))
	t.Logf("chaos: %s; series occurrences %d, doubled %d; answers %v / %v, unanswered %d",
		tally, occurrences, doubledOccurrences, directLoad.status, cutLoad.status, directLoad.unanswered+cutLoad.unanswered)
	require.Empty(t, append(directLoad.unexpected, cutLoad.unexpected...), "every answer is 201 or 503 database_unavailable with Retry-After")
	require.Zero(t, tally.Lost, "every enqueue answered 201 completes")
	require.Zero(t, tally.Doubled, "no job completes twice")
	require.Zero(t, tally.Open, "no execution stays open")
	require.Zero(t, doubledOccurrences, "no occurrence of the series is enqueued twice")
	direct.requireAllUp(t)
	cut.requireAllUp(t)
}

// startHalf starts an API, a scheduler and a worker (named name-api,
// name-scheduler, name-worker) on the database at url, at Flint's default
// timings; the caller sets the cluster's store for checks.
func startHalf(t *testing.T, url, name string) *haCluster {
	t.Helper()
	c := &haCluster{url: url, procs: map[string]*proc{}}
	addr := freeAddr(t)
	c.procs["api"] = startFlint(t, "api", url, append(halfEnv(name+"-api"), "FLINT_ADDR="+addr)...)
	c.api = newAPIClient("http://" + addr)
	c.api.http.Timeout = 30 * time.Second // past the 20 s statement deadline: a cut-off API's answer is a 503
	c.api.waitReady(t, 60*time.Second)
	c.procs["scheduler"] = startFlint(t, "scheduler", url, halfEnv(name+"-scheduler")...)
	c.procs["worker"] = startFlint(t, "worker", url, halfEnv(name+"-worker")...)
	for _, p := range c.procs {
		p.ready(t, 60*time.Second)
	}
	return c
}

// count is how many answers had status code.
func (a *answers) count(code int) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status[code]
}

// lastAcked is when an enqueue was last answered 201.
func (a *answers) lastAcked() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastAckedAt
}

// halfEnv is the environment of a process of startHalf: Flint's default
// timings instead of the tests' short ones, 20 worker slots.
func halfEnv(id string) []string {
	return []string{"FLINT_WORKER_ID=" + id, "LOG_LEVEL=info", "FLINT_WORKERS=20",
		"FLINT_LEASE_TTL=", "FLINT_HEARTBEAT_INTERVAL=", "FLINT_REAP_INTERVAL=", "FLINT_PROMOTE_INTERVAL=", "FLINT_POLL_INTERVAL="}
}

// chaosPartition is FLINT_CHAOS_PARTITION, how long each partition of
// TestChaosPartition lasts: 3m unless set.
func chaosPartition(t *testing.T) time.Duration {
	t.Helper()
	return envDuration(t, "FLINT_CHAOS_PARTITION", 3*time.Minute)
}
