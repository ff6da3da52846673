//go:build chaos

package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// TestChaosFailovers is make chaos: for FLINT_CHAOS_DURATION (5m unless
// set) it takes the primary away again and again under the mixed load of
// TestFailoverUnderLoad, alternating a crash failover (the primary killed,
// the standby promoted, the lost server rebuilt as the new standby) with
// a clean switchover (the old primary stays up as a standby), and prints
// how long /readyz took to be 200 on each new primary and the lost,
// doubled and open counts at the end.
func TestChaosFailovers(t *testing.T) {
	duration := chaosDuration(t)
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

// TestChaosPatroni is make chaos's Patroni part: for FLINT_CHAOS_DURATION
// it runs the faults of TestPatroniFailover again and again (the leader's
// PostgreSQL killed, the leader's whole node killed and started again, a
// patronictl switchover) under the mixed load, and prints how long
// Patroni took to elect each new leader, how long /readyz then took to be
// 200 on it (at most 30 s), and the lost, doubled and open counts.
func TestChaosPatroni(t *testing.T) {
	duration := chaosDuration(t)
	pc := dbtest.NewPatroni(t)
	c := startFlintOn(t, pc.URL("flint"))
	events := c.watchEvents(t)
	// Two clients, not TestChaosFailovers' four: beside Patroni and etcd,
	// four outrun the two workers on the 2-core machine, and the backlog
	// outlasts the settling.
	load := startAPILoad(c, 2)
	load.waitAcked(t, time.Now(), 15*time.Second)

	var faults []patroniFault
	end := time.Now().Add(duration)
	for round := 1; time.Now().Before(end); round++ {
		t.Logf("round %d", round)
		faults = append(faults, c.patroniRound(t, pc, load)...)
	}
	c.requireRecovered(t, events, time.Now().Add(-time.Second))
	byKind := map[string][]time.Duration{}
	var ready []time.Duration
	for _, f := range faults {
		kind := f.What[:strings.LastIndex(f.What, " (")] // without the member's name
		byKind[kind] = append(byKind[kind], f.Election)
		ready = append(ready, f.ReadyAfter)
	}
	for kind, d := range byKind {
		slices.Sort(d)
		t.Logf("chaos: %s %d times; Patroni elected the new leader after a median %s, max %s",
			kind, len(d), d[len(d)/2].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
	}
	slices.Sort(ready)
	t.Logf("chaos over %s: %d changes of leader; /readyz 200 after the election: median %s, max %s",
		duration, len(faults), ready[len(ready)/2].Round(time.Millisecond), ready[len(ready)-1].Round(time.Millisecond))
	tally := c.requireClean(t, load, 5*time.Minute)
	t.Logf("chaos: %s", tally)
}

// chaosDuration is FLINT_CHAOS_DURATION, 5m unless set.
func chaosDuration(t *testing.T) time.Duration {
	t.Helper()
	return envDuration(t, "FLINT_CHAOS_DURATION", 5*time.Minute)
}

// envDuration is the duration the environment variable name holds, def
// unless set.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, name)
	return d
}
