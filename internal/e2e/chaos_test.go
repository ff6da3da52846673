//go:build chaos

package e2e

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestChaosFailovers is make chaos: for FLINT_CHAOS_DURATION (5m unless
// set) it takes the primary away again and again under the mixed load of
// TestFailoverUnderLoad, alternating a crash failover (the primary killed,
// the standby promoted, the lost server rebuilt as the new standby) with
// a clean switchover (the old primary stays up as a standby), and prints
// how long /readyz took to be 200 on each new primary and the lost,
// doubled and open counts at the end.
func TestChaosFailovers(t *testing.T) {
	duration := 5 * time.Minute
	if s := os.Getenv("FLINT_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "FLINT_CHAOS_DURATION")
		duration = d
	}
	c := startHACluster(t)
	events := c.watchEvents(t)
	load := startAPILoad(c, 4)
	load.waitAcked(t, time.Now(), 15*time.Second)

	var failovers, switchovers int
	var recoveries []time.Duration
	end := time.Now().Add(duration)
	for round := 0; time.Now().Before(end); round++ {
		time.Sleep(2 * time.Second) // the scenario: two seconds of work between one change of primary and the next
		var promoted time.Time
		kind := "switchover"
		if round%2 == 0 {
			kind = "failover"
			promoted = c.pair.Failover()
			failovers++
		} else {
			promoted = c.pair.Switchover()
			switchovers++
		}
		ready := c.readyOn(t, c.pair.Primary().Addr(), 15*time.Second)
		recoveries = append(recoveries, ready.Sub(promoted))
		t.Logf("round %d, %s to %s: /readyz 200 after %s", round+1, kind, c.pair.Primary().Name, ready.Sub(promoted).Round(time.Millisecond))
		load.waitAcked(t, ready, 15*time.Second)
		c.requireAllUp(t)
		if kind == "failover" {
			c.pair.Rejoin()
		}
	}
	c.requireRecovered(t, events, time.Now().Add(-time.Second))
	acked := load.finish()
	tally := c.settle(t, acked, 3*time.Minute)
	slices.Sort(recoveries)
	t.Logf("chaos over %s: %d failovers, %d switchovers; /readyz 200 after a promotion: median %s, max %s",
		duration, failovers, switchovers,
		recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond))
	t.Logf("chaos: %s; answers %v, unanswered %d, unexpected %d", tally, load.status, load.unanswered, len(load.unexpected))
	require.Empty(t, load.unexpected, "every answer is 201 or 503 database_unavailable with Retry-After")
	require.Zero(t, tally.Lost, "every enqueue answered 201 completes")
	require.Zero(t, tally.Doubled, "no job completes twice")
	require.Zero(t, tally.Open, "no execution stays open")
	c.requireAllUp(t)
}
