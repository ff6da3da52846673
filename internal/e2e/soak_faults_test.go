//go:build soak

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// TestSoakFaults is make soak: Flint's API, scheduler and worker processes
// (the real binary, two APIs, two schedulers, three workers) on a Patroni
// cluster with Redis, for SOAK_DURATION (2 minutes unless set), under a
// steady stream of enqueues through the APIs at half the rate the workers
// drained a queue of the same jobs at the start of the run (SOAK_RATE, in
// jobs a second, sets it instead), while faults of every kind the field
// meets come at random intervals of 5–30 s, overlapping:
//
//   - a worker, a scheduler or an API SIGKILLed or SIGTERMed, and started
//     again after up to 3 s, as a supervisor does;
//   - the leader's PostgreSQL killed (Patroni fails over to the
//     synchronous standby and rewinds the old leader), the leader's whole
//     node killed (the lock expires; the node starts again and rejoins),
//     and a planned patronictl switchover;
//   - Redis killed, and started again (empty) 10–40 s later;
//   - a partition of 30–60 s between PostgreSQL and the processes behind
//     the proxies (one API, one scheduler, one worker), the proxies
//     swallowing every byte or stalling;
//
// and a REPEATABLE READ transaction is held on the primary for ten minutes
// at a time (reopened at once on the new primary after a failover), with
// ten minutes between one and the next. A series fires every second
// throughout. At the end every enqueue answered 201 has completed exactly
// once, no execution is left open, no occurrence of the series was
// enqueued twice, and no process exited that was not signalled; it prints
// the jobs, the faults by kind, lost, doubled, open and the pickup
// latency (first start less enqueue) over the run.
//
//	make soak SOAK_DURATION=1h
//
//flint:long a soak scenario: setup, load and faults, then the tally, read best top to bottom
func TestSoakFaults(t *testing.T) {
	duration := soakDuration(t)
	r := newSoakRig(t)
	series := enqueueAll(t, r.store, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "series", IntervalSeconds: 1})[0]
	require.NotNil(t, series.ScheduleID)

	rate := 0.0
	if v := os.Getenv("SOAK_RATE"); v != "" {
		var err error
		rate, err = strconv.ParseFloat(v, 64)
		require.NoError(t, err, "SOAK_RATE")
		t.Logf("load: %.0f jobs/s (SOAK_RATE)", rate)
	} else {
		drained := r.measureDrain(t, 20000)
		rate = drained / 2
		t.Logf("load: %.0f jobs/s, half the drain rate", rate)
	}
	begin := time.Now()
	load := startSoakLoad(r.apis, rate, 64)

	stopHold := make(chan struct{})
	var holds, reopens int
	var holdWG sync.WaitGroup
	holdWG.Add(1)
	go func() { // ten minutes held, ten minutes not, from a random start in the first two minutes
		defer holdWG.Done()
		wait := time.Duration(rand.Int64N(int64(2 * time.Minute)))
		for {
			select {
			case <-stopHold:
				return
			case <-time.After(wait):
			}
			left := time.Until(begin.Add(duration))
			if left < time.Minute {
				return
			}
			holds++
			t.Logf("%s: a REPEATABLE READ transaction held for %s", soakAt(begin), min(10*time.Minute, left).Round(time.Second))
			reopens += r.holdRepeatableRead(t, min(10*time.Minute, left), stopHold)
			wait = 10 * time.Minute
		}
	}()

	f := &soakFaults{r: r, begin: begin, counts: map[string]int{}}
	for time.Since(begin) < duration {
		// the soak: faults at random intervals of 5-30 s
		time.Sleep(5*time.Second + time.Duration(rand.Int64N(int64(25*time.Second))))
		r.checkAlive()
		if time.Since(begin) >= duration {
			break
		}
		f.one(t)
		t.Logf("%s: %d jobs acknowledged so far; %s", soakAt(begin), load.ackedCount(), r.sessions())
	}
	close(stopHold)
	holdWG.Wait()
	f.end(t)
	acked := load.finish()
	ran := time.Since(begin)
	r.checkAlive()

	// What the run did, before the tally (which may fail).
	var kinds []string
	total := 0
	for k, n := range f.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		if !strings.HasPrefix(k, "skipped: ") {
			total += n
		}
	}
	slices.Sort(kinds)
	t.Logf("soak over %s at %.0f jobs/s (%d jobs sent): %d faults: %s; %d REPEATABLE READ transactions held (%d ended by a failover and opened again)",
		ran.Round(time.Second), rate, load.sent, total, strings.Join(kinds, ", "), holds, reopens)
	t.Logf("soak: answers %v, unanswered %d, unexpected %d; processes that exited unsignalled %d",
		load.status, load.unanswered, len(load.unexpected), len(r.unexpected))
	for _, u := range load.unexpected[:min(10, len(load.unexpected))] {
		t.Logf("unexpected answer: %s", u)
	}
	tally := r.soakTally(t, acked, begin, 20*time.Minute)
	occurrences, doubledOccurrences := seriesTally(t, r.store, *series.ScheduleID)
	t.Logf("soak: %s; series occurrences %d, doubled %d", tally, occurrences, doubledOccurrences)
	require.Empty(t, load.unexpected, "every answer is 201, or 503 with Retry-After")
	require.Zero(t, tally.Lost, "every enqueue answered 201 completes")
	require.Zero(t, tally.Doubled, "no job completes twice")
	require.Zero(t, tally.Open, "no execution stays open")
	require.Zero(t, doubledOccurrences, "no occurrence of the series is enqueued twice")
	require.Empty(t, r.unexpected, "no process exits unless signalled")
	require.Greater(t, tally.Acked, 0)
}

// sessions says how many of Flint's sessions on the primary wait for a
// lock, and how many sat idle in a transaction for over 10 s.
func (r *soakRig) sessions() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var waiting, idle int
	err := r.store.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'),
		count(*) FILTER (WHERE state = 'idle in transaction' AND now() - state_change > interval '10 seconds')
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&waiting, &idle)
	if err != nil {
		return "sessions unknown: " + err.Error()
	}
	return fmt.Sprintf("%d sessions waiting for a lock, %d idle in a transaction for over 10 s", waiting, idle)
}

// soakDuration is SOAK_DURATION, 2 minutes unless set.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "SOAK_DURATION")
		return d
	}
	return 2 * time.Minute
}

func soakAt(begin time.Time) string {
	return "+" + time.Since(begin).Round(time.Second).String()
}

// soakFaults deals the faults and keeps count of them.
type soakFaults struct {
	r           *soakRig
	begin       time.Time
	counts      map[string]int
	mu          sync.Mutex
	redisDown   bool
	partitioned bool
	timers      []*time.Timer
}

// one deals one fault, chosen at random by weight among those that can
// happen now.
func (f *soakFaults) one(t *testing.T) {
	t.Helper()
	r := f.r
	kill := func(role string, sig syscall.Signal) func() bool {
		return func() bool { r.kill(r.pick(role), sig); return true }
	}
	type fault struct {
		what   string
		weight int
		do     func() bool // false: it could not happen now
	}
	faults := []fault{
		{"worker SIGKILL", 12, kill("worker", syscall.SIGKILL)},
		{"worker SIGTERM", 7, kill("worker", syscall.SIGTERM)},
		{"scheduler SIGKILL", 4, kill("scheduler", syscall.SIGKILL)},
		{"scheduler SIGTERM", 3, kill("scheduler", syscall.SIGTERM)},
		{"API SIGKILL", 5, kill("api", syscall.SIGKILL)},
		{"API SIGTERM", 4, kill("api", syscall.SIGTERM)},
		{"Patroni failover (leader's PostgreSQL killed)", 4, func() bool { return f.patroni(t, "postgres") }},
		{"Patroni failover (leader's node killed)", 2, func() bool { return f.patroni(t, "node") }},
		{"Patroni switchover", 3, func() bool { return f.patroni(t, "switchover") }},
	}
	f.mu.Lock()
	if !f.redisDown {
		faults = append(faults, fault{"Redis killed and restarted", 5, func() bool { f.redisLoss(); return true }})
	}
	if !f.partitioned {
		faults = append(faults,
			fault{"partition (bytes swallowed)", 4, func() bool { f.partition(dbtest.Swallowing); return true }},
			fault{"partition (bytes stalled)", 4, func() bool { f.partition(dbtest.Stalled); return true }})
	}
	f.mu.Unlock()
	sum := 0
	for _, x := range faults {
		sum += x.weight
	}
	n := rand.IntN(sum)
	for _, x := range faults {
		if n -= x.weight; n < 0 {
			t.Logf("%s: %s", soakAt(f.begin), x.what)
			if x.do() {
				f.counts[x.what]++
			} else {
				f.counts["skipped: "+x.what]++
			}
			return
		}
	}
}

// patroni moves the leader: its PostgreSQL killed, its node killed (and
// started again once another leads), or a switchover. It waits first for
// the other member to be the synchronous standby (the leader's commits
// are on it), reinitialises that member if it has not rejoined within a
// minute, and skips the fault, saying so and returning false, if it is
// still not the standby two minutes after.
func (f *soakFaults) patroni(t *testing.T, how string) bool {
	t.Helper()
	pc := f.r.pc
	var leader *dbtest.Member
	synced := func() bool {
		leader = pc.Leader()
		return leader != nil && soakSynced(pc.Other(leader))
	}
	ok := pollUntil(time.Minute, 200*time.Millisecond, synced)
	if !ok && leader != nil {
		// A member that has not rejoined in a minute is stuck (it needs WAL
		// of its old timeline that the leader has recycled): an operator
		// clones it again.
		if err := pc.Reinit(pc.Other(leader)); err != nil {
			t.Logf("%s: %v", soakAt(f.begin), err)
		} else {
			t.Logf("%s: %s reinitialised from the leader", soakAt(f.begin), pc.Other(leader).Name)
			f.counts["operator: member reinitialised"]++
		}
		ok = pollUntil(2*time.Minute, 200*time.Millisecond, synced)
	}
	if !ok {
		t.Logf("no leader with a synchronous standby (a member reinitialised or not); fault skipped\n%s", pc.List())
		return false
	}
	at := time.Now()
	switch how {
	case "postgres":
		pc.KillPostgres(leader)
	case "node":
		pc.KillNode(leader)
	default:
		pc.Switchover(leader, pc.Other(leader))
	}
	next, elected := pc.WaitLeader(leader, 90*time.Second)
	t.Logf("%s: %s leads, elected %s after the fault", soakAt(f.begin), next.Name, elected.Sub(at).Round(time.Millisecond))
	if how == "node" {
		pc.Start(leader)
	}
	return true
}

// soakSynced reports whether m's Patroni says it is the synchronous
// standby.
func soakSynced(m *dbtest.Member) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/sync", m.APIPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// redisLoss kills Redis and starts it again, empty, 10–40 s later.
func (f *soakFaults) redisLoss() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redisDown = true
	f.r.redis.Kill()
	f.timers = append(f.timers, time.AfterFunc(10*time.Second+time.Duration(rand.Int64N(int64(30*time.Second))), func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.redisDown {
			f.r.redis.Start()
			f.redisDown = false
		}
	}))
}

// partition cuts the processes behind the proxies off for 30–60 s.
func (f *soakFaults) partition(how dbtest.Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partitioned = true
	for _, p := range f.r.proxies {
		if how == dbtest.Swallowing {
			p.Swallow()
		} else {
			p.Stall()
		}
	}
	f.timers = append(f.timers, time.AfterFunc(30*time.Second+time.Duration(rand.Int64N(int64(30*time.Second))), f.heal))
}

func (f *soakFaults) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.r.proxies {
		p.Heal()
	}
	f.partitioned = false
}

// end ends every fault still under way: the network heals, Redis comes
// back.
func (f *soakFaults) end(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	for _, tm := range f.timers {
		tm.Stop()
	}
	f.mu.Unlock()
	f.heal()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.redisDown {
		f.r.redis.Start()
		f.redisDown = false
	}
}
