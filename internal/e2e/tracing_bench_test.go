package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkDrainTracing drains 50,000 noop jobs, each enqueued under a
// trace of its own, with one `flint worker` process, alternating tracing
// off and tracing on at 100 % sampling (every attempt's span exported
// over OTLP/HTTP to a receiver that reads and discards them, so that a
// trace store's own work does not compete for the CPU), five rounds of
// each; it reports the median rate of each and the median of the
// rounds' costs, in the rate and in the worker process's CPU time per
// job (which the machine's other load disturbs far less).
// With FLINT_BENCH_BASE naming another build of flint (the previous
// release, without tracing), each round drains with it too, which is
// what tracing off is to cost nothing against:
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
	modes := []string{"off", "on"}
	base := os.Getenv("FLINT_BENCH_BASE")
	if base != "" {
		modes = append([]string{"base"}, modes...)
	}
	const total, rounds = 50_000, 5
	for b.Loop() {
		b.StopTimer()
		rates := map[string][]float64{}
		cpus := map[string][]float64{} // the worker's CPU µs per job
		for range rounds {
			for _, mode := range modes {
				store, dbURL := dbtest.NewStore(b)
				enqueueTracedNoops(b, store, total)
				env := []string{"DATABASE_URL=" + dbURL, "REDIS_URL=", "OTEL_EXPORTER_OTLP_ENDPOINT="}
				exe := bin
				switch mode {
				case "on":
					env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.URL, "OTEL_TRACES_SAMPLER=always_on")
				case "base":
					exe = base
				}
				before := exported.Load()
				rate, cpu := drainWorkers(b, exe, store, 1, total, env...)
				rates[mode] = append(rates[mode], rate)
				cpus[mode] = append(cpus[mode], float64(cpu.Microseconds())/total)
				if mode == "on" {
					require.Positive(b, exported.Load()-before, "no spans were exported")
				} else {
					require.Equal(b, before, exported.Load(), "spans were exported with tracing off")
				}
			}
		}
		// Each round's modes ran back to back, so a round's ratio is
		// less exposed to what else the machine was doing than the rates.
		med := func(v []float64) float64 {
			v = slices.Clone(v)
			slices.Sort(v)
			return v[len(v)/2]
		}
		cost := func(what string, m map[string][]float64, of, against string, more bool) float64 {
			var r []float64
			for i := range rounds {
				if more { // CPU per job: more is worse
					r = append(r, 100*(m[of][i]/m[against][i]-1))
				} else {
					r = append(r, 100*(1-m[of][i]/m[against][i]))
				}
			}
			b.Logf("%s: tracing %s against %s, per round: %.1f %%", what, of, against, r)
			return med(r)
		}
		for _, mode := range modes {
			b.ReportMetric(med(rates[mode]), mode+"-jobs/s")
			b.ReportMetric(med(cpus[mode]), mode+"-cpu-µs/job")
			b.Logf("tracing %s: %.0f jobs/s, worker CPU %.1f µs/job", mode, rates[mode], cpus[mode])
		}
		b.ReportMetric(cost("rate", rates, "on", "off", false), "on-rate-cost-%")
		b.ReportMetric(cost("CPU", cpus, "on", "off", true), "on-cpu-cost-%")
		if base != "" {
			b.ReportMetric(cost("rate", rates, "off", "base", false), "off-rate-cost-%")
			b.ReportMetric(cost("CPU", cpus, "off", "base", true), "off-cpu-cost-%")
		}
		b.StartTimer()
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
