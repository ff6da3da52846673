package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
)

// These tests run Flint against a PostgreSQL primary with a synchronous
// standby (dbtest.Pair) and take the primary away under load.

// haCluster is Flint's processes (API, scheduler, two workers) on a pair
// (or a Patroni cluster), all given its multi-host connection string.
type haCluster struct {
	pair  *dbtest.Pair // nil on a Patroni cluster
	url   string
	api   *apiClient
	procs map[string]*proc
	store *db.Store // for checking; follows failovers like Flint's own
}

// startHACluster builds a pair and starts Flint on it.
func startHACluster(t *testing.T) *haCluster {
	t.Helper()
	pair := dbtest.NewPair(t)
	c := startFlintOn(t, pair.URL("flint"))
	c.pair = pair
	return c
}

// startFlintOn starts Flint's processes on the database at url, a
// multi-host connection string. `flint api` creates and migrates the
// database through it.
func startFlintOn(t *testing.T, url string) *haCluster {
	t.Helper()
	c := &haCluster{url: url, procs: map[string]*proc{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c.procs["api"] = startFlint(t, "api", c.url, "FLINT_ADDR="+addr, "LOG_LEVEL=info")
	c.api = newAPIClient("http://" + addr)
	c.api.http.Timeout = 10 * time.Second
	c.api.waitReady(t, 60*time.Second)
	c.procs["scheduler"] = startFlint(t, "scheduler", c.url, "LOG_LEVEL=info")
	c.procs["w1"] = startFlint(t, "worker", c.url, "FLINT_WORKER_ID=w1", "LOG_LEVEL=info")
	c.procs["w2"] = startFlint(t, "worker", c.url, "FLINT_WORKER_ID=w2", "LOG_LEVEL=info")
	for _, p := range c.procs {
		p.ready(t, 60*time.Second)
	}
	c.store = openStore(t, c.url)
	return c
}

// requireAllUp fails if any Flint process has exited.
func (c *haCluster) requireAllUp(t *testing.T) {
	t.Helper()
	for name, p := range c.procs {
		select {
		case <-p.done:
			t.Fatalf("flint %s exited during the failover: %v", name, p.err)
		default:
		}
	}
}

// readyOn waits until /readyz is 200 on the server at addr, and returns
// when it was.
func (c *haCluster) readyOn(t *testing.T, addr string, limit time.Duration) time.Time {
	t.Helper()
	waitUntil(t, limit, func() (bool, string) {
		what := "/readyz to be 200 on " + addr + "; last answer: "
		resp, err := c.api.http.Get(c.api.base + "/readyz")
		if err != nil {
			return false, what + err.Error()
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var r struct {
			Server domain.DatabaseServer `json:"server"`
		}
		ok := resp.StatusCode == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Server.Address == addr
		return ok, fmt.Sprintf("%s%d %s", what, resp.StatusCode, body)
	})
	return time.Now()
}

// apiLoad enqueues a mix of jobs over the API from a few clients until
// stopped, and keeps what the API answered.
type apiLoad struct {
	answers // a 503 is accepted as database_unavailable only
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startAPILoad(c *haCluster, clients int) *apiLoad {
	l := &apiLoad{stop: make(chan struct{})}
	for i := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				path, body := "/api/v1/jobs", ""
				switch r.IntN(4) {
				case 0:
					body = `{"type":"noop"}`
				case 1:
					body = fmt.Sprintf(`{"type":"sleep","payload":{"ms":%d}}`, 10+r.IntN(300))
				case 2:
					body = fmt.Sprintf(`{"type":"sleep","payload":{"ms":%d},"queue":"other","priority":"high"}`, 1+r.IntN(50))
				default:
					path = "/api/v1/jobs/batch"
					body = fmt.Sprintf(`{"jobs":[{"type":"noop"},{"type":"sleep","payload":{"ms":%d}},{"type":"noop","queue":"other"}]}`, r.IntN(100))
				}
				l.enqueue(c, path, body)
				time.Sleep(time.Duration(5+r.IntN(20)) * time.Millisecond) // the scenario: a client's pace
			}
		}()
	}
	return l
}

func (l *apiLoad) enqueue(c *haCluster, path, body string) {
	req, _ := http.NewRequest(http.MethodPost, c.api.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", c.api.key)
	resp, err := c.api.http.Do(req)
	l.record(resp, err, 0, func(body string) bool { return strings.Contains(body, "database_unavailable") })
}

// waitAcked waits until an enqueue is acknowledged after since.
func (l *apiLoad) waitAcked(t *testing.T, since time.Time, limit time.Duration) time.Time {
	t.Helper()
	var at time.Time
	waitFor(t, limit, "an enqueue answered 201 after "+since.Format(time.TimeOnly), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		at = l.lastAckedAt
		return at.After(since)
	})
	return at
}

// waitMoreAcked waits until n more jobs than now were acknowledged.
func (l *apiLoad) waitMoreAcked(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	l.mu.Lock()
	want := len(l.acked) + n
	l.mu.Unlock()
	waitFor(t, limit, fmt.Sprintf("%d more jobs acknowledged", n), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acked) >= want
	})
}

func (l *apiLoad) finish() []uuid.UUID {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// sseWatch reads the API's event stream into a buffer.
type sseWatch struct {
	mu   sync.Mutex
	text strings.Builder
}

func (c *haCluster) watchEvents(t *testing.T) *sseWatch {
	t.Helper()
	w := &sseWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.api.base+"/api/v1/sse/events", nil)
			req.Header.Set("X-API-Key", c.api.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				time.Sleep(100 * time.Millisecond) // a client's pause before it reconnects
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				w.mu.Lock()
				w.text.WriteString(sc.Text() + "\n")
				w.mu.Unlock()
			}
			resp.Body.Close()
		}
	}()
	return w
}

// mark is where the stream has got to, for hasSince.
func (w *sseWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.text.Len()
}

// hasSince reports whether one line of what the stream carried after mark
// holds every one of parts.
func (w *sseWatch) hasSince(mark int, parts ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for line := range strings.Lines(w.text.String()[mark:]) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// requireRecovered checks what must come back after a failover: job
// completions reach the event stream again (the API's LISTEN session and
// the workers' NOTIFY are on the new primary), and both workers heartbeat
// into the registry again. Events are delivered at most once, and one
// published before the API's LISTEN session is back is not replayed (the
// session's reconnect tells subscribers to resync instead); and under load
// a new job can wait behind thousands. So any completion the stream
// carries from now on will do, and a job is enqueued every 3 s to make
// one when nothing else runs.
func (c *haCluster) requireRecovered(t *testing.T, events *sseWatch, promoted time.Time) {
	t.Helper()
	mark := events.mark()
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.Eventually(t, func() bool {
			return c.api.do(t, http.MethodPost, "/api/v1/jobs", `{"type":"noop","queue":"after_failover","priority":"high"}`, nil) == http.StatusCreated
		}, 15*time.Second, 100*time.Millisecond)
		if pollUntil(3*time.Second, 50*time.Millisecond, func() bool { return events.hasSince(mark, `"status":"completed"`) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event stream carried no job completion for 30 s")
		}
	}
	require.Eventually(t, func() bool {
		var out struct {
			Workers []domain.WorkerInfo `json:"workers"`
		}
		if c.api.do(t, http.MethodGet, "/api/v1/workers", nil, &out) != http.StatusOK {
			return false
		}
		fresh := 0
		for _, w := range out.Workers {
			if (w.ID == "w1" || w.ID == "w2") && w.HeartbeatAt.After(promoted) {
				fresh++
			}
		}
		return fresh == 2
	}, 30*time.Second, 100*time.Millisecond, "both workers heartbeat into the registry again")
}

// TestFailoverUnderLoad kills the primary (pg_ctl stop -m immediate) and
// promotes its synchronous standby while the API takes enqueues and two
// workers and the scheduler run: every enqueue answered 201 completes on
// the new primary, none completes twice, nothing stays running, every
// process stays up, /readyz is 200 on the new primary within 15 s of the
// promotion, and events and the worker registry come back. Then the old
// primary rejoins as a standby and the roles switch back cleanly.
func TestFailoverUnderLoad(t *testing.T) {
	t.Parallel()
	c := startHACluster(t)
	events := c.watchEvents(t)
	load := startAPILoad(c, 3)
	load.waitAcked(t, time.Now(), 15*time.Second)
	load.waitMoreAcked(t, 100, 30*time.Second) // enqueues and jobs under way when the primary dies

	promoted := c.pair.Failover()
	ready := c.readyOn(t, c.pair.Primary().Addr(), 15*time.Second)
	t.Logf("failover: /readyz 200 on the new primary %s after the promotion", ready.Sub(promoted).Round(time.Millisecond))
	load.waitAcked(t, ready, 15*time.Second)
	c.requireRecovered(t, events, promoted)
	c.requireAllUp(t)

	// The lost server comes back as a standby; a planned switchover moves
	// the primary back while the old one stays up, read-only.
	c.pair.Rejoin()
	promoted = c.pair.Switchover()
	ready = c.readyOn(t, c.pair.Primary().Addr(), 15*time.Second)
	t.Logf("switchover: /readyz 200 on the new primary %s after the promotion", ready.Sub(promoted).Round(time.Millisecond))
	load.waitAcked(t, ready, 15*time.Second)
	c.requireAllUp(t)

	acked := load.finish()
	tally := c.settle(t, acked, 90*time.Second)
	t.Logf("%s; answers %v, unanswered %d", tally, load.status, load.unanswered)
	require.Empty(t, load.unexpected, "every answer is 201 or 503 database_unavailable with Retry-After")
	require.Zero(t, tally.Lost, "every enqueue answered 201 completes")
	require.Zero(t, tally.Doubled, "no job completes twice")
	require.Zero(t, tally.Open, "no execution stays open")
	require.Greater(t, tally.Acked, 50)
	c.requireAllUp(t)
}
