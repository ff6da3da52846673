package e2e

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/jobs"
)

// enqueueFrom enqueues params from enqueuers goroutines, one job per call,
// or in one call when enqueuers is 0.
func enqueueFrom(b *testing.B, store *db.Store, params []jobs.EnqueueParams, enqueuers int) {
	if enqueuers == 0 {
		if _, err := store.Enqueue(context.Background(), params...); err != nil {
			b.Fatal(err)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range enqueuers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(params)); i = next.Add(1) - 1 {
				if _, err := store.Enqueue(context.Background(), params[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// reportSignals reports the signal benchmark's figures: the latencies from
// each send's return to its handler resumed and to its job done, and the
// rates of sends and of completions from the first send.
func reportSignals(b *testing.B, first time.Time, sent, resumed, done []time.Time) {
	n := len(sent)
	lat, res := make([]float64, n), make([]float64, n)
	last, lastSent := first, first
	for i := range n {
		lat[i] = float64(done[i].Sub(sent[i]).Microseconds()) / 1000
		res[i] = float64(resumed[i].Sub(sent[i]).Microseconds()) / 1000
		if done[i].After(last) {
			last = done[i]
		}
		if sent[i].After(lastSent) {
			lastSent = sent[i]
		}
	}
	slices.Sort(lat)
	slices.Sort(res)
	b.ReportMetric(pct(res, 50), "send-to-resumed-p50-ms")
	b.ReportMetric(pct(res, 99), "send-to-resumed-p99-ms")
	b.ReportMetric(pct(lat, 50), "send-to-done-p50-ms")
	b.ReportMetric(pct(lat, 99), "send-to-done-p99-ms")
	b.ReportMetric(float64(n)/last.Sub(first).Seconds(), "signals/s")
	b.ReportMetric(float64(n)/lastSent.Sub(first).Seconds(), "sends/s")
}

// waitWaiting waits until n jobs wait.
func waitWaiting(b *testing.B, store *db.Store, n int) {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var waiting int
		if err := store.Pool().QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE status = 'waiting'`).Scan(&waiting); err != nil {
			b.Fatal(err)
		}
		if waiting == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d jobs waiting", waiting, n)
		}
	}
}

// pct is the p-th percentile of sorted.
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p/100))]
}
