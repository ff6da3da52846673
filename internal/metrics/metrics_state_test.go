package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

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
	events := make([]domain.Event, 0, 2*n)
	now := time.Now()
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		events = append(events,
			domain.Event{Status: jobs.StateQueued, Type: "t", Queue: q, At: now},
			domain.Event{Status: jobs.StateQueued, Type: "t", Queue: q, At: now})
	}
	m.ObserveEvents(events)
	m.ObserveEvents(events[2*MaxSeriesPerFamily:]) // the over-cap tuples again
	require.Equal(t, MaxSeriesPerFamily+1, testutil.CollectAndCount(m.Registry(), "flint_jobs_enqueued_total"))
	require.Equal(t, 4.0*500, testutil.ToFloat64(m.enqueued.get(key2{"t", "q" + strconv.Itoa(n-1)})))
	require.Equal(t, 2.0, testutil.ToFloat64(m.enqueued.get(key2{"t", "q0"})))
	// Invalid UTF-8 does not panic.
	m.ObserveEvents([]domain.Event{{Status: jobs.StateRunning, Type: "t", Queue: "bad\xff", RunAt: now, At: now.Add(time.Millisecond)}})
	_, err := m.Registry().Gather()
	require.NoError(t, err)
}
