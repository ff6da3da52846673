//go:build soak

package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

// soakRig is Flint as TestSoakFaults runs it: on a Patroni cluster (both
// members in a multi-host DATABASE_URL) with a private Redis, two `flint
// api`, two `flint scheduler` and three `flint worker` processes. One API,
// one scheduler and one worker reach PostgreSQL through loopback proxies,
// one in front of each member, so that a partition cuts them off while
// the others carry on.
type soakRig struct {
	t       *testing.T
	pc      *dbtest.Patroni
	redis   *dbtest.RedisServer
	proxies [2]*dbtest.Proxy
	direct  string // DATABASE_URL to both members
	cut     string // the same through the proxies
	store   *db.Store
	procs   []*soakProc
	apis    []string // the APIs' base URLs

	mu         sync.Mutex
	unexpected []string // processes that exited without being signalled
}

// soakProc is one Flint process of the rig, restarted after each kill.
type soakProc struct {
	name, role string
	behind     bool     // reaches PostgreSQL through the proxies
	env        []string // its settings
	p          *proc
	signalled  bool // its exit is one the soak caused
	starts     int
}

// soakEnv is every process's settings: Redis, Flint's own timings (the
// defaults, as it ships: a 30 s lease, heartbeats every 5 s), and info
// logging rather than the tests' debug, which an hour of would fill memory.
func (r *soakRig) soakEnv() []string {
	return []string{"REDIS_URL=" + r.redis.URL(), "LOG_LEVEL=info", "FLINT_LEASE_TTL=", "FLINT_HEARTBEAT_INTERVAL=",
		"FLINT_REAP_INTERVAL=", "FLINT_PROMOTE_INTERVAL=", "FLINT_POLL_INTERVAL="}
}

// newSoakRig builds the cluster, Redis and the proxies, and starts every
// process.
func newSoakRig(t *testing.T) *soakRig {
	t.Helper()
	r := &soakRig{t: t, pc: dbtest.NewPatroni(t), redis: dbtest.StartRedis(t)}
	r.direct = r.pc.URL("flint")
	for i, m := range r.pc.Members {
		r.proxies[i] = dbtest.NewTCPProxy(t, m.Addr())
	}
	r.cut = strings.Replace(r.direct, r.pc.Members[0].Addr()+","+r.pc.Members[1].Addr(),
		r.proxies[0].Addr()+","+r.proxies[1].Addr(), 1)
	require.NotEqual(t, r.direct, r.cut)

	addrA, addrB := freeAddr(t), freeAddr(t)
	r.apis = []string{"http://" + addrA, "http://" + addrB}
	r.add("api-a", "api", false, "FLINT_ADDR="+addrA)
	r.start(r.procs[0]) // it creates and migrates the database
	r.waitReady(r.procs[0])
	r.add("api-b", "api", true, "FLINT_ADDR="+addrB)
	r.add("scheduler-a", "scheduler", false)
	r.add("scheduler-b", "scheduler", true)
	r.add("w1", "worker", false, "FLINT_WORKERS=20")
	r.add("w2", "worker", false, "FLINT_WORKERS=20")
	r.add("w3", "worker", true, "FLINT_WORKERS=20")
	for _, p := range r.procs[1:] {
		r.start(p)
	}
	for _, p := range r.procs[1:] {
		r.waitReady(p)
	}
	r.store = openStore(t, r.direct)
	return r
}

func (r *soakRig) add(name, role string, behind bool, env ...string) {
	r.procs = append(r.procs, &soakProc{name: name, role: role, behind: behind, env: env})
}

// start starts p (again), with a worker id of its own each time, as a
// process that a supervisor restarts gets by default.
func (r *soakRig) start(p *soakProc) {
	r.t.Helper()
	u := r.direct
	if p.behind {
		u = r.cut
	}
	p.starts++
	env := append(r.soakEnv(), p.env...)
	env = append(env, fmt.Sprintf("FLINT_WORKER_ID=%s-%d", p.name, p.starts))
	p.p = startFlint(r.t, p.role, u, env...)
	p.signalled = false
}

// waitReady waits until p has started, starting it again when it exits
// first (the database it needs may be failing over at that moment, as a
// supervisor would, after a second).
func (r *soakRig) waitReady(p *soakProc) {
	r.t.Helper()
	for try := 1; ; try++ {
		ok := pollUntil(90*time.Second, 100*time.Millisecond, func() bool {
			select {
			case <-p.p.done:
				return true
			default:
			}
			return strings.Contains(p.p.out.String(), `"msg":"flint started"`)
		})
		select {
		case <-p.p.done:
			r.t.Logf("%s exited while starting (try %d): %v\n%s", p.name, try, p.p.err, tail(p.p.out.String(), 2000))
			require.Less(r.t, try, 10, "%s failed to start ten times", p.name)
			time.Sleep(time.Second) // a supervisor's pause before it restarts a process
			r.start(p)
			continue
		default:
		}
		require.True(r.t, ok, "%s did not start within 90 s:\n%s", p.name, tail(p.p.out.String(), 4000))
		return
	}
}

// kill sends sig to p, waits for it to exit (SIGKILL after a minute of
// draining) and starts it again.
func (r *soakRig) kill(p *soakProc, sig syscall.Signal) {
	r.t.Helper()
	r.checkAlive()
	p.signalled = true
	_ = p.p.cmd.Process.Signal(sig)
	select {
	case <-p.p.done:
	case <-time.After(time.Minute):
		r.t.Logf("%s still draining a minute after SIGTERM; killing it", p.name)
		_ = p.p.cmd.Process.Kill()
		<-p.p.done
	}
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond) // the soak: a supervisor's restart delay
	r.start(p)
	r.waitReady(p)
}

// checkAlive notes (and restarts) every process that exited without
// being signalled: none may.
func (r *soakRig) checkAlive() {
	r.t.Helper()
	for _, p := range r.procs {
		select {
		case <-p.p.done:
			if !p.signalled {
				msg := fmt.Sprintf("%s (start %d) exited by itself: %v\n%s", p.name, p.starts, p.p.err, tail(p.p.out.String(), 4000))
				r.t.Log(msg)
				r.mu.Lock()
				r.unexpected = append(r.unexpected, msg)
				r.mu.Unlock()
				p.signalled = true
				r.start(p)
				r.waitReady(p)
			}
		default:
		}
	}
}

// pick returns a random process of role.
func (r *soakRig) pick(role string) *soakProc {
	var of []*soakProc
	for _, p := range r.procs {
		if p.role == role {
			of = append(of, p)
		}
	}
	return of[rand.IntN(len(of))]
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
