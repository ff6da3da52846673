//go:build soak

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// soakJob is one job of the soak's mix: noops and sleeps of 1–20 ms, on
// two queues at three priorities.
type soakJob struct {
	typ      string
	ms       int
	queue    string
	priority int
}

func randomSoakJob(r *rand.Rand) soakJob {
	switch n := r.IntN(20); {
	case n < 8:
		return soakJob{typ: jobs.TypeNoop, queue: "default", priority: 2}
	case n < 14:
		return soakJob{typ: jobs.TypeSleep, ms: 1 + r.IntN(20), queue: "default", priority: 2}
	case n < 17:
		return soakJob{typ: jobs.TypeSleep, ms: 1 + r.IntN(20), queue: "other", priority: 1}
	default:
		return soakJob{typ: jobs.TypeNoop, queue: "other", priority: 3}
	}
}

func (j soakJob) json() string {
	payload := "{}"
	if j.typ == jobs.TypeSleep {
		payload = fmt.Sprintf(`{"ms":%d}`, j.ms)
	}
	return fmt.Sprintf(`{"type":%q,"queue":%q,"priority":%d,"payload":%s}`, j.typ, j.queue, j.priority, payload)
}

func (j soakJob) params() jobs.EnqueueParams {
	p := jobs.EnqueueParams{Type: j.typ, Queue: j.queue, Priority: j.priority}
	if j.typ == jobs.TypeSleep {
		p.Payload = json.RawMessage(fmt.Sprintf(`{"ms":%d}`, j.ms))
	}
	return p
}

// soakLoad enqueues the mix through the APIs at a steady rate, open loop:
// requests go out on schedule, each on its own, up to inFlight at once, to
// the APIs a load balancer calls ready, taking turns; it keeps what they
// answered. Four requests in five carry a batch of ten jobs, the fifth one
// job. Requests that fall behind (inFlight of them waiting on an API cut
// off, say) are not made up for later: the rate is a ceiling.
type soakLoad struct {
	answers         // any 503 with Retry-After is accepted
	rate    float64 // jobs a second
	sent    int     // jobs sent, under answers.mu
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startSoakLoad(apis []string, rate float64, inFlight int) *soakLoad {
	l := &soakLoad{rate: rate, stop: make(chan struct{})}
	lb := newSoakBalancer(apis, l.stop, &l.wg)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
		hc := &http.Client{Timeout: 30 * time.Second}
		slots := make(chan struct{}, inFlight)
		next := time.Now()
		for k := 0; ; k++ {
			select {
			case <-l.stop:
				return
			case <-time.After(time.Until(next)):
			}
			n := 10
			if r.IntN(5) == 0 {
				n = 1
			}
			path, body := soakRequest(r, n)
			select {
			case <-l.stop:
				return
			case slots <- struct{}{}:
			}
			l.wg.Add(1)
			go func(base string) {
				defer l.wg.Done()
				defer func() { <-slots }()
				l.enqueue(hc, base, path, body, n)
			}(lb.pick(k))
			next = next.Add(time.Duration(float64(n) / rate * float64(time.Second)))
			if behind := time.Now().Add(-time.Second); next.Before(behind) {
				next = behind
			}
		}
	}()
	return l
}

// soakRequest is an enqueue of n jobs of the mix: its path and body.
func soakRequest(r *rand.Rand, n int) (path, body string) {
	if n == 1 {
		return "/api/v1/jobs", randomSoakJob(r).json()
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = randomSoakJob(r).json()
	}
	return "/api/v1/jobs/batch", `{"jobs":[` + strings.Join(parts, ",") + `]}`
}

func (l *soakLoad) enqueue(hc *http.Client, base, path, body string, n int) {
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := hc.Do(req)
	l.mu.Lock()
	l.sent += n
	l.mu.Unlock()
	l.record(resp, err, n, func(string) bool { return true })
}

// soakBalancer is a load balancer's view of the APIs: it asks each for
// /readyz every second, giving it 2 s to answer, and sends requests only
// to those whose last answer was 200 (to any when none is ready), so that
// an API cut off from PostgreSQL or restarting is left out within a few
// seconds, as behind a real balancer.
type soakBalancer struct {
	apis  []string
	ready []atomic.Bool
}

func newSoakBalancer(apis []string, stop <-chan struct{}, wg *sync.WaitGroup) *soakBalancer {
	b := &soakBalancer{apis: apis, ready: make([]atomic.Bool, len(apis))}
	for i, base := range apis {
		b.ready[i].Store(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 2 * time.Second}
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				resp, err := hc.Get(base + "/readyz")
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				b.ready[i].Store(ok)
			}
		}()
	}
	return b
}

// pick is the API for a client's k-th request.
func (b *soakBalancer) pick(k int) string {
	var ready []string
	for i, base := range b.apis {
		if b.ready[i].Load() {
			ready = append(ready, base)
		}
	}
	if len(ready) == 0 {
		return b.apis[k%len(b.apis)]
	}
	return ready[k%len(ready)]
}

func (l *soakLoad) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *soakLoad) finish() []uuid.UUID {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// measureDrain enqueues n jobs of the mix straight into the database, as
// fast as it can, while the workers run, and returns the rate they were
// done at: n over the time from the first enqueue to the last completion.
func (r *soakRig) measureDrain(t *testing.T, n int) float64 {
	t.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	begin := time.Now()
	var ids []uuid.UUID
	for len(ids) < n {
		batch := make([]jobs.EnqueueParams, min(1000, n-len(ids)))
		for i := range batch {
			batch[i] = randomSoakJob(rnd).params()
		}
		for _, j := range enqueueAll(t, r.store, batch...) {
			ids = append(ids, j.ID)
		}
	}
	var done int
	waitUntil(t, 10*time.Minute, func() (bool, string) {
		err := r.store.Pool().QueryRow(ctx, `SELECT count(*) FROM `+everyJobSQL+` j
			WHERE id = ANY($1) AND status = 'completed'`, ids).Scan(&done)
		return err == nil && done == n, fmt.Sprintf("the drain of %d jobs; %d done", n, done)
	})
	var last time.Time
	require.NoError(t, r.store.Pool().QueryRow(ctx, `SELECT max(finished_at) FROM `+
		`(SELECT id, finished_at FROM jobs UNION ALL SELECT id, finished_at FROM job_history) j WHERE id = ANY($1)`,
		ids).Scan(&last))
	took := last.Sub(begin)
	rate := float64(n) / took.Seconds()
	t.Logf("drain: %d jobs of the mix in %s: %.0f jobs/s", n, took.Round(time.Millisecond), rate)
	return rate
}

// holdRepeatableRead holds a REPEATABLE READ transaction open on the
// primary for hold, having read jobs, from a connection of its own; when
// a failover ends it, it opens another on the new primary at once, for
// the rest of the time. It returns how often a failover ended it.
func (r *soakRig) holdRepeatableRead(t *testing.T, hold time.Duration, stop <-chan struct{}) int {
	end := time.Now().Add(hold)
	ended := 0
	for time.Now().Before(end) {
		opened := false
		ctx, cancel := context.WithDeadline(context.Background(), end)
		err := func() error {
			conn, err := pgx.Connect(ctx, r.direct)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			if err != nil {
				return err
			}
			defer tx.Rollback(context.Background())
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil {
				return err
			}
			opened = true
			for { // the transaction stays open; a statement every 5 s notices a failover
				select {
				case <-stop:
					return nil
				case <-ctx.Done():
					return nil
				case <-time.After(5 * time.Second):
				}
				if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
					return err
				}
			}
		}()
		cancel()
		select {
		case <-stop:
			return ended
		default:
		}
		if err != nil && time.Now().Before(end) {
			if opened {
				ended++
				t.Logf("the REPEATABLE READ transaction ended (%v); opening another", err)
			}
			time.Sleep(time.Second) // the primary may be failing over: a second between attempts
		}
	}
	return ended
}
