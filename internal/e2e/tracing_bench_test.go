package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkDrainTracing drains 50,000 noop jobs, each enqueued under a
// trace of its own, with one `flint worker` process with tracing off and
// with tracing on at 100 % sampling (every attempt's span exported over
// OTLP/HTTP to a receiver that reads and discards them, so that the
// receiver's own work does not compete for the CPU). Run it with -count
// to interleave the two:
//
//	make bench BENCH=DrainTracing BENCHPKG=./internal/e2e BENCHTIME=1x
func BenchmarkDrainTracing(b *testing.B) {
	bin := buildFlint(b, false)
	var exported atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exported.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()
	for _, mode := range []string{"off", "on"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				store, dbURL := dbtest.NewStore(b)
				enqueueTracedNoops(b, store, 50_000)
				env := []string{"DATABASE_URL=" + dbURL, "REDIS_URL=", "OTEL_EXPORTER_OTLP_ENDPOINT="}
				if mode == "on" {
					env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.URL, "OTEL_TRACES_SAMPLER=always_on")
				}
				before := exported.Load()
				rate := drainWorkers(b, bin, store, 1, 50_000, env...)
				b.ReportMetric(rate, "jobs/s")
				if mode == "on" {
					require.Positive(b, exported.Load()-before, "no spans were exported")
				}
				b.StartTimer()
			}
		})
	}
}

// enqueueTracedNoops enqueues total noop jobs in batches of 5000, each
// with a traceparent of a trace of its own, as jobs enqueued by traced
// requests carry.
func enqueueTracedNoops(b *testing.B, store interface {
	Enqueue(context.Context, ...jobs.EnqueueParams) ([]jobs.Enqueued, error)
}, total int) {
	batch := make([]jobs.EnqueueParams, 5000)
	for n := 0; n < total; n += len(batch) {
		for i := range batch {
			batch[i] = jobs.EnqueueParams{Type: jobs.TypeNoop,
				Traceparent: fmt.Sprintf("00-%032x-%016x-01", n+i+1, n+i+1)}
		}
		_, err := store.Enqueue(context.Background(), batch...)
		require.NoError(b, err)
	}
}
