package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// These tests run Flint on a PostgreSQL cluster managed by Patroni
// (dbtest.Patroni: one etcd, two members, synchronous mode), given both
// members in a multi-host DATABASE_URL, and let Patroni move the primary
// under load: after a crash of the leader's PostgreSQL, after the loss of
// the leader's whole node, and in a planned switchover.

// readyAfterElection is how soon after Patroni elects a new leader
// /readyz must be 200 on it.
const readyAfterElection = 30 * time.Second

// patroniFault is one change of leader and what it took.
type patroniFault struct {
	What       string        // the fault, naming the member it hit
	Leader     string        // the member Patroni elected
	Election   time.Duration // from the fault to the new leader holding the lock
	ReadyAfter time.Duration // from the election to /readyz 200 on the new leader
}

func (f patroniFault) String() string {
	return fmt.Sprintf("%s: %s elected %s later, /readyz 200 on it %s after the election",
		f.What, f.Leader, f.Election.Round(time.Millisecond), f.ReadyAfter.Round(time.Millisecond))
}

// patroniRound runs the three faults once, each on the leader of the
// moment, under whatever load runs: the leader's PostgreSQL killed
// (Patroni fails over to the synchronous standby, then rewinds the old
// leader into a standby), the leader's Patroni and PostgreSQL killed (the
// lock expires after Patroni's ttl; the node is started again and
// rejoins), and patronictl switchover. After each, /readyz must be 200 on
// the new leader within readyAfterElection of its election, an enqueue
// must be answered 201, every Flint process must be up, and the old
// leader must be back as the synchronous standby before the next fault
// (the last fault's old leader is left to rejoin on its own).
func (c *haCluster) patroniRound(t *testing.T, pc *dbtest.Patroni, load *apiLoad) []patroniFault {
	t.Helper()
	faults := []struct {
		what  string
		do    func(leader *dbtest.Member)
		after func(old *dbtest.Member) // brings the old leader back
	}{
		{"the leader's PostgreSQL killed", pc.KillPostgres, func(*dbtest.Member) {}},
		{"the leader's node (Patroni and PostgreSQL) killed", pc.KillNode, pc.Start},
		{"patronictl switchover", func(leader *dbtest.Member) { pc.Switchover(leader, pc.Other(leader)) }, func(*dbtest.Member) {}},
	}
	var out []patroniFault
	for _, f := range faults {
		leader := pc.Leader()
		require.NotNil(t, leader, "a member leads before the fault:\n%s", pc.List())
		waited := time.Now()
		pc.WaitSync(pc.Other(leader), 2*time.Minute)
		if d := time.Since(waited); d > time.Second {
			t.Logf("waited %s for %s to be the synchronous standby", d.Round(time.Millisecond), pc.Other(leader).Name)
		}
		load.waitMoreAcked(t, 20, 30*time.Second) // enqueues and jobs under way at the fault
		at := time.Now()
		f.do(leader)
		next, elected := pc.WaitLeader(leader, 90*time.Second)
		ready := c.readyOn(t, next.Addr(), readyAfterElection-time.Since(elected))
		got := patroniFault{What: f.what + " (" + leader.Name + ")", Leader: next.Name,
			Election: elected.Sub(at), ReadyAfter: ready.Sub(elected)}
		t.Log(got)
		out = append(out, got)
		load.waitAcked(t, ready, 15*time.Second)
		c.requireAllUp(t)
		f.after(leader) // it rejoins as the standby; the next fault waits for that
	}
	return out
}

// requireClean settles the run and fails on anything lost, doubled or
// left open, or any answer but 201 and 503 database_unavailable.
func (c *haCluster) requireClean(t *testing.T, load *apiLoad, limit time.Duration) haTally {
	t.Helper()
	acked := load.finish()
	tally := c.settle(t, acked, limit)
	t.Logf("%s; answers %v, unanswered %d", tally, load.status, load.unanswered)
	require.Empty(t, load.unexpected, "every answer is 201 or 503 database_unavailable with Retry-After")
	require.Zero(t, tally.Lost, "every enqueue answered 201 completes")
	require.Zero(t, tally.Doubled, "no job completes twice")
	require.Zero(t, tally.Open, "no execution stays open")
	c.requireAllUp(t)
	return tally
}

// TestPatroniFailover runs Flint's API, scheduler and two workers under
// mixed API load on a Patroni cluster, and goes through the three faults
// of patroniRound once: every enqueue answered 201 completes exactly
// once, no execution stays open, every process stays up, and /readyz is
// 200 on each new leader within 30 s of Patroni electing it.
func TestPatroniFailover(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	pc := dbtest.NewPatroni(t)
	t.Logf("Patroni cluster up after %s", time.Since(begin).Round(time.Millisecond))
	c := startFlintOn(t, pc.URL("flint"))
	t.Logf("Flint up after %s", time.Since(begin).Round(time.Millisecond))
	events := c.watchEvents(t)
	load := startAPILoad(c, 2)
	load.waitAcked(t, time.Now(), 15*time.Second)
	load.waitMoreAcked(t, 100, 30*time.Second)

	start := time.Now()
	c.patroniRound(t, pc, load)
	c.requireRecovered(t, events, start)
	t.Logf("three faults in %s", time.Since(start).Round(time.Millisecond))
	tally := c.requireClean(t, load, 2*time.Minute)
	require.Greater(t, tally.Acked, 50)
}

// TestReadmePatroniConfig holds the Patroni configuration the README's
// High availability section shows to the one the tests run.
func TestReadmePatroniConfig(t *testing.T) {
	t.Parallel()
	require.Equal(t, dbtest.PatroniDCS, guideBlock(t, "patroni-dcs.yml"),
		"the README's Patroni configuration and dbtest.PatroniDCS have drifted apart")
}
