package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"flint/jobs"
)

// scrape serves h once and returns the body and the samples it holds,
// keyed by the series as written ("name{a="x",b="y"}").
func scrape(t testing.TB, h http.Handler, header http.Header) (int, string, map[string]float64) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	samples := map[string]float64{}
	if rec.Code != http.StatusOK {
		return rec.Code, string(body), samples
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		require.Positive(t, i, "malformed line %q", line)
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, "line %q", line)
		samples[line[:i]] = v
	}
	return rec.Code, string(body), samples
}

// lifecycle builds the events of a realistic stretch of work.
type lifecycle struct {
	events []jobs.Event
	now    time.Time
}

func (l *lifecycle) add(id uuid.UUID, st jobs.State, typ, queue string, attempt int, runAt time.Time) {
	l.now = l.now.Add(time.Millisecond)
	l.events = append(l.events, jobs.Event{JobID: id, Status: st, Type: typ, Queue: queue, Attempt: attempt, At: l.now, RunAt: runAt})
}

func realisticEvents() ([]jobs.Event, []uuid.UUID) {
	l := &lifecycle{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	var ids []uuid.UUID
	// Five emails enqueued due now, claimed 102 ms after run_at, succeeded.
	for range 5 {
		id := uuid.New()
		ids = append(ids, id)
		runAt := l.now
		l.add(id, jobs.StateQueued, "send_email", "default", 0, runAt)
		l.now = l.now.Add(100 * time.Millisecond)
		l.add(id, jobs.StateRunning, "send_email", "default", 1, runAt)
		l.add(id, jobs.StateCompleted, "send_email", "default", 1, runAt)
	}
	// Two delayed reports: scheduled, promoted, failed and retried,
	// promoted again, failed for good.
	for range 2 {
		id := uuid.New()
		ids = append(ids, id)
		runAt := l.now.Add(time.Minute)
		l.add(id, jobs.StateScheduled, "report", "reports", 0, runAt)
		l.now = runAt
		l.add(id, jobs.StateQueued, "report", "reports", 0, runAt)
		l.add(id, jobs.StateRunning, "report", "reports", 1, runAt)
		retryAt := l.now.Add(2 * time.Second)
		l.add(id, jobs.StateScheduled, "report", "reports", 1, retryAt)
		l.now = retryAt
		l.add(id, jobs.StateQueued, "report", "reports", 1, retryAt)
		l.add(id, jobs.StateRunning, "report", "reports", 2, retryAt)
		l.add(id, jobs.StateDeadLetter, "report", "reports", 2, retryAt)
	}
	// A workflow step: blocked, released to queued, cancelled before it ran.
	id := uuid.New()
	ids = append(ids, id)
	l.add(id, jobs.StateBlocked, "send_email", "default", 0, l.now)
	l.add(id, jobs.StateQueued, "send_email", "default", 0, l.now)
	l.add(id, jobs.StateCancelled, "send_email", "default", 0, l.now)
	// An aging re-score: not a state change (zero time).
	l.events = append(l.events, jobs.Event{JobID: id, Status: jobs.StateQueued, Type: "send_email", Queue: "default"})
	return l.events, ids
}

func TestExposition(t *testing.T) {
	t.Parallel()
	m := New("1.2.3")
	events, ids := realisticEvents()
	sink := &recordingSink{}
	m.Tee(sink).Publish(events)
	require.Len(t, sink.events, len(events), "Tee passes every event on")

	for range 5 {
		m.ObserveRun("send_email", jobs.OutcomeSucceeded, 40*time.Millisecond)
	}
	for range 4 {
		m.ObserveRun("report", jobs.OutcomeFailed, 3*time.Second)
	}
	m.ObserveRun("report", jobs.OutcomeInterrupted, 20*time.Minute) // beyond the last bucket
	m.ObserveRun("report", "weird", time.Second)
	// A claim stamped before its run_at (clock skew): counted as 0.
	claimed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.ObserveEvents([]jobs.Event{{Status: jobs.StateRunning, Type: "report", Queue: "reports", Attempt: 3, RunAt: claimed.Add(time.Second), At: claimed}})

	reapedID := uuid.New()
	ids = append(ids, reapedID)
	m.ObserveReaped([]jobs.Moved{
		{JobID: reapedID, Status: jobs.StateQueued, Type: "send_email", Queue: "default"},
		{JobID: uuid.New(), Status: jobs.StateQueued, Type: "send_email", Queue: "default", Attempt: 1},
		{JobID: uuid.New(), Status: jobs.StateDeadLetter, Type: "report", Queue: "reports", Attempt: 3},
		{JobID: uuid.New()}, // lease lost: ignored
	})
	m.ObservePromoted(4)
	m.ObservePromoted(0)

	var published, dropped atomic.Uint64
	published.Store(123)
	dropped.Store(7)
	m.SetEventCounters(published.Load, dropped.Load)
	m.SetPoolState(func() int { return 3 }, func() int { return 50 })
	m.SetRedisState(func() string { return "ok" })
	m.SetStateSource(func(context.Context) (map[[2]string]int64, error) {
		return map[[2]string]int64{{"queued", "default"}: 12, {"running", "default"}: 3, {"dead_letter", "reports"}: 2}, nil
	})

	code, body, s := scrape(t, m.Handler(), nil)
	require.Equal(t, http.StatusOK, code)

	want := map[string]float64{
		`flint_build_info{version="1.2.3"}`: 1,

		// Enqueues: the emails (5), the released workflow step (1), the
		// reports when they became due (2); not the scheduled or blocked
		// insertions, the retry's promotion or the re-score.
		`flint_jobs_enqueued_total{queue="default",type="send_email"}`: 6,
		`flint_jobs_enqueued_total{queue="reports",type="report"}`:     2,

		`flint_jobs_finished_total{outcome="succeeded",queue="default",type="send_email"}`:   5,
		`flint_jobs_finished_total{outcome="cancelled",queue="default",type="send_email"}`:   1,
		`flint_jobs_finished_total{outcome="interrupted",queue="default",type="send_email"}`: 2,
		`flint_jobs_finished_total{outcome="retried",queue="reports",type="report"}`:         2,
		`flint_jobs_finished_total{outcome="dead_letter",queue="reports",type="report"}`:     2,

		`flint_job_duration_seconds_count{outcome="succeeded",type="send_email"}`:             5,
		`flint_job_duration_seconds_bucket{outcome="succeeded",type="send_email",le="0.05"}`:  5,
		`flint_job_duration_seconds_bucket{outcome="succeeded",type="send_email",le="0.025"}`: 0,
		`flint_job_duration_seconds_count{outcome="failed",type="report"}`:                    4,
		`flint_job_duration_seconds_sum{outcome="failed",type="report"}`:                      12,
		`flint_job_duration_seconds_count{outcome="interrupted",type="report"}`:               1,
		`flint_job_duration_seconds_bucket{outcome="interrupted",type="report",le="600"}`:     0,
		`flint_job_duration_seconds_count{outcome="other",type="report"}`:                     1,

		`flint_job_pickup_latency_seconds_count{queue="default"}`:              5,
		`flint_job_pickup_latency_seconds_sum{queue="default"}`:                0.51,
		`flint_job_pickup_latency_seconds_bucket{queue="default",le="0.1"}`:    0,
		`flint_job_pickup_latency_seconds_bucket{queue="default",le="0.25"}`:   5,
		`flint_job_pickup_latency_seconds_count{queue="reports"}`:              5,
		`flint_job_pickup_latency_seconds_bucket{queue="reports",le="0.0005"}`: 1,

		`flint_lease_expiries_total`:                       3,
		`flint_reaper_moved_total{to_state="queued"}`:      2,
		`flint_reaper_moved_total{to_state="dead_letter"}`: 1,
		`flint_promoter_promoted_total`:                    4,

		`flint_events_published_total`: 123,
		`flint_events_dropped_total`:   7,
		`flint_worker_busy`:            3,
		`flint_worker_capacity`:        50,
		`flint_redis_up`:               1,

		`flint_jobs{queue="default",state="queued"}`:      12,
		`flint_jobs{queue="default",state="running"}`:     3,
		`flint_jobs{queue="default",state="completed"}`:   0, // filled in
		`flint_jobs{queue="reports",state="dead_letter"}`: 2,
		`flint_jobs{queue="reports",state="blocked"}`:     0,
		`flint_metrics_source_errors_total`:               0,
	}
	for series, v := range want {
		got, ok := s[series]
		require.True(t, ok, "series %s missing from:\n%s", series, body)
		require.InDelta(t, v, got, 1e-9, "series %s", series)
	}
	// Each report's two claims were picked up 2 ms after run_at (the
	// test's clock ticks 1 ms per event).
	require.InDelta(t, 0.008, s[`flint_job_pickup_latency_seconds_sum{queue="reports"}`], 1e-9)
	// No outcome was invented for a failed attempt.
	for series := range s {
		require.NotContains(t, series, `flint_jobs_finished_total{outcome="failed"`)
	}
	for _, prefix := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "promhttp_metric_handler_errors_total"} {
		require.Contains(t, body, "\n"+prefix, "standard series %s", prefix)
	}
	for _, id := range ids {
		require.NotContains(t, body, id.String(), "job id leaked into the exposition")
	}
	require.NotContains(t, body, "# EOF", "OpenMetrics must stay off")

	// Later event counter values are read at scrape time.
	published.Store(200)
	_, _, s = scrape(t, m.Handler(), http.Header{"Accept": {"application/openmetrics-text; version=1.0.0"}})
	require.Equal(t, 200.0, s[`flint_events_published_total`])
}

type recordingSink struct{ events []jobs.Event }

func (r *recordingSink) Publish(evs []jobs.Event) { r.events = append(r.events, evs...) }

func TestRegistryGathersCleanly(t *testing.T) {
	t.Parallel()
	m := New("dev")
	events, _ := realisticEvents()
	m.ObserveEvents(events)
	m.SetEventCounters(func() uint64 { return 1 }, func() uint64 { return 0 })
	m.SetEventCounters(func() uint64 { return 2 }, func() uint64 { return 0 }) // replaces, no re-registration
	m.SetPoolState(func() int { return 1 }, func() int { return 2 })
	m.SetPoolState(func() int { return 1 }, func() int { return 4 })
	_, err := m.Registry().Gather()
	require.NoError(t, err)
	require.Equal(t, 2, testutil.CollectAndCount(m.Registry(), "flint_jobs_enqueued_total"))
	require.Equal(t, 4, testutil.CollectAndCount(m.Registry(), "flint_jobs_finished_total"))
	_, _, s := scrape(t, m.Handler(), nil)
	require.Equal(t, 2.0, s["flint_events_published_total"])
	require.Equal(t, 4.0, s["flint_worker_capacity"])
	// Unset callbacks leave their series out.
	_, body, _ := scrape(t, New("dev").Handler(), nil)
	for _, name := range []string{"flint_jobs{", "flint_redis_up", "flint_events_published_total", "flint_worker_busy"} {
		require.NotContains(t, body, "\n"+name)
	}
}

func TestStateSourceIsCached(t *testing.T) {
	t.Parallel()
	m := New("dev")
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	m.states.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	var calls, noDeadline atomic.Int64
	m.SetStateSource(func(ctx context.Context) (map[[2]string]int64, error) {
		n := calls.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			noDeadline.Add(1)
		}
		return map[[2]string]int64{{"queued", "default"}: n * 10}, nil
	})
	_, _, s := scrape(t, m.Handler(), nil)
	require.Equal(t, 10.0, s[`flint_jobs{queue="default",state="queued"}`])
	advance(1900 * time.Millisecond)
	_, _, s = scrape(t, m.Handler(), nil)
	require.Equal(t, int64(1), calls.Load(), "two scrapes within 2 s call the source once")
	require.Equal(t, 10.0, s[`flint_jobs{queue="default",state="queued"}`])

	advance(200 * time.Millisecond)
	_, _, s = scrape(t, m.Handler(), nil)
	require.Equal(t, int64(2), calls.Load(), "a stale cache is refreshed")
	require.Equal(t, 20.0, s[`flint_jobs{queue="default",state="queued"}`])

	// Concurrent scrapes of a stale cache share one call.
	advance(3 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { _, _ = m.Registry().Gather() })
	}
	wg.Wait()
	require.Equal(t, int64(3), calls.Load())
	require.Zero(t, noDeadline.Load(), "the source always gets a deadline")

	// A new source is called at once.
	m.SetStateSource(func(context.Context) (map[[2]string]int64, error) {
		return map[[2]string]int64{{"running", "q2"}: 1}, nil
	})
	_, _, s = scrape(t, m.Handler(), nil)
	require.Equal(t, 1.0, s[`flint_jobs{queue="q2",state="running"}`])
	require.NotContains(t, s, `flint_jobs{queue="default",state="queued"}`)
}

func TestStateSourceErrorsDoNotBreakTheScrape(t *testing.T) {
	t.Parallel()
	m := New("dev")
	m.states.ttl = 0 // every scrape calls the source
	m.states.timeout = 20 * time.Millisecond
	m.ObservePromoted(2)
	var fail atomic.Bool
	fail.Store(true)
	m.SetStateSource(func(ctx context.Context) (map[[2]string]int64, error) {
		if fail.Load() {
			return nil, errors.New("database unreachable")
		}
		return map[[2]string]int64{{"queued", "default"}: 1}, nil
	})
	code, body, s := scrape(t, m.Handler(), nil)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, "\nflint_jobs{")
	require.Equal(t, 1.0, s["flint_metrics_source_errors_total"])
	require.Equal(t, 2.0, s["flint_promoter_promoted_total"], "the rest of the scrape is served")

	// A source that hangs is cut off by the timeout.
	m.SetStateSource(func(ctx context.Context) (map[[2]string]int64, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	start := time.Now()
	code, _, s = scrape(t, m.Handler(), nil)
	require.Equal(t, http.StatusOK, code)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, 2.0, s["flint_metrics_source_errors_total"])

	// Once the source answers again, its counts are back.
	fail.Store(false)
	m.SetStateSource(func(context.Context) (map[[2]string]int64, error) {
		return map[[2]string]int64{{"queued", "default"}: 1}, nil
	})
	_, _, s = scrape(t, m.Handler(), nil)
	require.Equal(t, 1.0, s[`flint_jobs{queue="default",state="queued"}`])
	require.Equal(t, 2.0, s["flint_metrics_source_errors_total"])
}

func TestRedisState(t *testing.T) {
	t.Parallel()
	m := New("dev")
	var state atomic.Value
	state.Store("ok")
	m.SetRedisState(func() string { return state.Load().(string) })
	_, _, s := scrape(t, m.Handler(), nil)
	require.Equal(t, 1.0, s["flint_redis_up"])
	state.Store("down")
	_, _, s = scrape(t, m.Handler(), nil)
	require.Equal(t, 0.0, s["flint_redis_up"])
	require.Contains(t, s, "flint_redis_up")
	state.Store("disabled")
	_, _, s = scrape(t, m.Handler(), nil)
	require.NotContains(t, s, "flint_redis_up")
}

func TestProtected(t *testing.T) {
	t.Parallel()
	m := New("dev")
	h := m.Protected("s3cret-token")
	for _, hdr := range []string{"", "Bearer", "Bearer wrong", "Basic s3cret-token", "Bearer s3cret-token-and-more", "s3cret-token"} {
		header := http.Header{}
		if hdr != "" {
			header.Set("Authorization", hdr)
		}
		code, body, _ := scrape(t, h, header)
		require.Equal(t, http.StatusUnauthorized, code, "Authorization %q", hdr)
		require.NotContains(t, body, "flint_build_info")
	}
	code, body, _ := scrape(t, h, http.Header{"Authorization": {"Bearer s3cret-token"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "flint_build_info")
	code, _, _ = scrape(t, h, http.Header{"Authorization": {"bearer s3cret-token"}})
	require.Equal(t, http.StatusOK, code, "the scheme is case-insensitive")

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Bearer")

	code, _, _ = scrape(t, m.Protected(""), nil)
	require.Equal(t, http.StatusOK, code, "an empty token disables the check")
}

func TestCardinalityIsCapped(t *testing.T) {
	t.Parallel()
	m := New("dev")
	n := MaxSeriesPerFamily + 500
	events := make([]jobs.Event, 0, 2*n)
	now := time.Now()
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		events = append(events,
			jobs.Event{Status: jobs.StateQueued, Type: "t", Queue: q, At: now},
			jobs.Event{Status: jobs.StateQueued, Type: "t", Queue: q, At: now})
	}
	m.ObserveEvents(events)
	m.ObserveEvents(events[2*MaxSeriesPerFamily:]) // the over-cap tuples again
	require.Equal(t, MaxSeriesPerFamily+1, testutil.CollectAndCount(m.Registry(), "flint_jobs_enqueued_total"))
	require.Equal(t, 4.0*500, testutil.ToFloat64(m.enqueued.get(key2{"t", "q" + strconv.Itoa(n-1)})))
	require.Equal(t, 2.0, testutil.ToFloat64(m.enqueued.get(key2{"t", "q0"})))
	// Invalid UTF-8 does not panic.
	m.ObserveEvents([]jobs.Event{{Status: jobs.StateRunning, Type: "t", Queue: "bad\xff", RunAt: now, At: now.Add(time.Millisecond)}})
	_, err := m.Registry().Gather()
	require.NoError(t, err)
}

func TestConcurrentObservation(t *testing.T) {
	t.Parallel()
	m := New("dev")
	events, _ := realisticEvents()
	const goroutines, rounds = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				m.ObserveEvents(events)
				m.ObserveRun("send_email", jobs.OutcomeSucceeded, time.Millisecond)
				m.ObserveReaped([]jobs.Moved{{Status: jobs.StateQueued, Type: fmt.Sprintf("t%d", g), Queue: "default"}})
				if i%50 == 0 {
					_, _ = m.Registry().Gather()
				}
			}
		})
	}
	wg.Wait()
	_, _, s := scrape(t, m.Handler(), nil)
	total := float64(goroutines * rounds)
	require.Equal(t, 6*total, s[`flint_jobs_enqueued_total{queue="default",type="send_email"}`])
	require.Equal(t, 5*total, s[`flint_jobs_finished_total{outcome="succeeded",queue="default",type="send_email"}`])
	require.Equal(t, total, s[`flint_job_duration_seconds_count{outcome="succeeded",type="send_email"}`])
	require.Equal(t, total, s[`flint_lease_expiries_total`])
	require.Equal(t, float64(rounds), s[`flint_jobs_finished_total{outcome="interrupted",queue="default",type="t3"}`])
}

// benchEvents is a steady mix: 10 types over 4 queues going through
// enqueue, claim and completion, with some retries.
func benchEvents(n int) []jobs.Event {
	now := time.Now()
	out := make([]jobs.Event, 0, n)
	for i := 0; len(out) < n; i++ {
		typ, queue := fmt.Sprintf("type%d", i%10), fmt.Sprintf("queue%d", i%4)
		id := uuid.New()
		out = append(out,
			jobs.Event{JobID: id, Status: jobs.StateQueued, Type: typ, Queue: queue, At: now, RunAt: now},
			jobs.Event{JobID: id, Status: jobs.StateRunning, Type: typ, Queue: queue, Attempt: 1, At: now.Add(3 * time.Millisecond), RunAt: now})
		if i%10 == 0 {
			out = append(out, jobs.Event{JobID: id, Status: jobs.StateScheduled, Type: typ, Queue: queue, Attempt: 1, At: now, RunAt: now.Add(time.Second)})
		} else {
			out = append(out, jobs.Event{JobID: id, Status: jobs.StateCompleted, Type: typ, Queue: queue, Attempt: 1, At: now, RunAt: now})
		}
	}
	return out[:n]
}

// BenchmarkObserveEvents reports the cost per event in batches as the store
// publishes them (claims and finishes arrive in batches of many jobs).
func BenchmarkObserveEvents(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			m := New("bench")
			events := benchEvents(batch)
			// Sort-free, realistic order: each job's events are adjacent,
			// so consecutive events rarely share (type, queue, outcome).
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m.ObserveEvents(events)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
		})
	}
	b.Run("parallel/batch=1000", func(b *testing.B) {
		m := New("bench")
		events := benchEvents(1000)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.ObserveEvents(events)
			}
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/event")
	})
}
