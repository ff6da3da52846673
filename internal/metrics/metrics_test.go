package metrics

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
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
	events []domain.Event
	now    time.Time
}

func (l *lifecycle) add(id uuid.UUID, st jobs.State, typ, queue string, attempt int, runAt time.Time) {
	l.now = l.now.Add(time.Millisecond)
	l.events = append(l.events, domain.Event{JobID: id, Status: st, Type: typ, Queue: queue, Attempt: attempt, At: l.now, RunAt: runAt})
}

func realisticEvents() ([]domain.Event, []uuid.UUID) {
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
	l.events = append(l.events, domain.Event{JobID: id, Status: jobs.StateQueued, Type: "send_email", Queue: "default"})
	return l.events, ids
}

// expositionWant is what TestExposition's scrape must show after its
// events, runs, reaps and promotions.
var expositionWant = map[string]float64{
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

func TestExposition(t *testing.T) {
	t.Parallel()
	m := New("1.2.3")
	events, ids := realisticEvents()
	sink := &recordingSink{}
	m.Tee(sink).Publish(events)
	require.Len(t, sink.events, len(events), "Tee passes every event on")

	for range 5 {
		m.ObserveRun("send_email", domain.OutcomeSucceeded, 40*time.Millisecond)
	}
	for range 4 {
		m.ObserveRun("report", domain.OutcomeFailed, 3*time.Second)
	}
	m.ObserveRun("report", domain.OutcomeInterrupted, 20*time.Minute) // beyond the last bucket
	m.ObserveRun("report", "weird", time.Second)
	// A claim stamped before its run_at (clock skew): counted as 0.
	claimed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.ObserveEvents([]domain.Event{{Status: jobs.StateRunning, Type: "report", Queue: "reports", Attempt: 3, RunAt: claimed.Add(time.Second), At: claimed}})

	reapedID := uuid.New()
	ids = append(ids, reapedID)
	m.ObserveReaped([]domain.Moved{
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

	for series, v := range expositionWant {
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

type recordingSink struct{ events []domain.Event }

func (r *recordingSink) Publish(evs []domain.Event) { r.events = append(r.events, evs...) }

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

// TestTableSeries: PostgreSQL's statistics of the hot tables appear as
// gauges and counters; a vacuum that never ran has no timestamp series.
func TestTableSeries(t *testing.T) {
	t.Parallel()
	m := New("dev")
	vacuumed := time.Unix(1_800_000_000, 0)
	m.SetTableSource(func(context.Context) ([]domain.TableHealth, error) {
		return []domain.TableHealth{{Table: "jobs", LiveTuples: 120, DeadTuples: 45_000, LastVacuum: &vacuumed, Vacuums: 3, Autovacuums: 0}}, nil
	})
	_, _, s := scrape(t, m.Handler(), nil)
	require.Equal(t, 120.0, s[`flint_pg_table_live_tuples{table="jobs"}`])
	require.Equal(t, 45000.0, s[`flint_pg_table_dead_tuples{table="jobs"}`])
	require.Equal(t, 1.8e9, s[`flint_pg_table_last_vacuum_timestamp_seconds{by="manual",table="jobs"}`])
	require.NotContains(t, s, `flint_pg_table_last_vacuum_timestamp_seconds{by="auto",table="jobs"}`)
	require.Equal(t, 3.0, s[`flint_pg_table_vacuums_total{by="manual",table="jobs"}`])
	require.Equal(t, 0.0, s[`flint_pg_table_vacuums_total{by="auto",table="jobs"}`])
}
