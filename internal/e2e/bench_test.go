package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
	"github.com/stretchr/testify/require"
)

// Queue benchmarks. Each reports jobs/s (or latency percentiles) as custom
// metrics; run them with
//
//	make bench BENCH='Enqueue|Drain|Pickup' BENCHPKG=.
//
// They use a fresh database each, and one process, as `flint serve` does.

func benchStore(b *testing.B) (*db.Store, string) {
	b.Helper()
	return dbtest.NewStore(b)
}

func BenchmarkEnqueueSingle(b *testing.B) {
	store, _ := benchStore(b)
	ctx := context.Background()
	p := jobs.EnqueueParams{Type: jobs.TypeNoop, Payload: json.RawMessage(`{"n":1}`)}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := store.Enqueue(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

func BenchmarkEnqueueSingleParallel(b *testing.B) {
	store, _ := benchStore(b)
	ctx := context.Background()
	p := jobs.EnqueueParams{Type: jobs.TypeNoop, Payload: json.RawMessage(`{"n":1}`)}
	b.SetParallelism(8)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := store.Enqueue(ctx, p); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

func BenchmarkEnqueueBatch1000(b *testing.B) {
	store, _ := benchStore(b)
	ctx := context.Background()
	batch := make([]jobs.EnqueueParams, 1000)
	for i := range batch {
		batch[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Payload: json.RawMessage(`{"n":1}`), Priority: 1 + i%3}
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		if _, err := store.Enqueue(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/time.Since(start).Seconds(), "jobs/s")
}

var benchWorkers = 0

// BenchmarkDrainNoop enqueues 100,000 noop jobs and measures how fast one
// pool runs them all to completion, with events published as `flint serve`
// publishes them: through NOTIFY (postgres), or through Redis with the
// ready queue as the claim's fast path (redis).
func BenchmarkDrainNoop(b *testing.B) {
	for _, mode := range []string{"postgres", "redis"} {
		b.Run(mode, func(b *testing.B) { benchDrain(b, mode) })
	}
}

func benchDrain(b *testing.B, mode string) {
	const total = 100_000
	for b.Loop() {
		b.StopTimer()
		store, _ := benchStore(b)
		ctx := context.Background()
		busCtx, stopBus := context.WithCancel(ctx)
		var rds *db.Redis
		var fast workers.FastPath
		if mode == "redis" {
			url, prefix := dbtest.RedisPrefix(b)
			var err error
			if rds, err = db.OpenRedis(ctx, url, prefix, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
				b.Fatal(err)
			}
			store.SetRedis(rds)
			fast = db.NewReadyQueue(store, rds)
		}
		bus := db.NewEventBus(store, rds, rds != nil, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if os.Getenv("FLINT_BENCH_NO_EVENTS") == "" {
			store.SetEventSink(bus)
		}
		busDone := make(chan struct{})
		go func() { defer close(busDone); _ = bus.Run(busCtx) }()
		enqueueNoops(b, store, total)
		reg := jobs.NewRegistry()
		domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
		var done atomic.Int64
		all := make(chan struct{})
		if rds != nil {
			// Let the enqueue events reach the ready queue first.
			require.True(b, pollUntil(5*time.Minute, 10*time.Millisecond, func() bool {
				n, _ := rds.ReadyLen(ctx)
				return n >= total
			}), "the enqueue events never all reached the ready queue")
		}
		pool := workers.NewPool(workers.Config{
			WorkerID: "bench",
			Workers:  benchWorkers,
			FastPath: fast,
			OnMoved: func(m []domain.Moved) {
				if done.Add(int64(len(m))) == total {
					close(all)
				}
			},
		}, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		runCtx, cancel := context.WithCancel(ctx)
		b.StartTimer()
		start := time.Now()
		ran := make(chan struct{})
		go func() { _ = pool.Run(runCtx); close(ran) }()
		select {
		case <-all:
		case <-time.After(10 * time.Minute):
			b.Fatalf("drained %d of %d", done.Load(), total)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		cancel()
		<-ran
		var left int
		if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status <> 'completed'`).Scan(&left); err != nil || left != 0 {
			b.Fatalf("%d jobs not completed (%v)", left, err)
		}
		b.ReportMetric(total/elapsed.Seconds(), "jobs/s")
		b.ReportMetric(float64(bus.Dropped()), "events-dropped")
		stopBus()
		<-busDone
		if rds != nil {
			rds.Close()
		}
		b.StartTimer()
	}
}

// pickupBench runs a pool woken by LISTEN/NOTIFY (as a separate worker
// process is) and measures enqueue-to-handler-start latency, enqueueing one
// job every interval for n jobs.
func pickupBench(b *testing.B, interval time.Duration, n int) {
	store, u := benchStore(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, n)
	got := make(chan struct{}, n)
	reg := jobs.NewRegistry()
	reg.Register("probe", jobs.HandlerFunc(func(_ context.Context, j *jobs.Job) (any, error) {
		now := time.Now()
		var p struct {
			At int64 `json:"at"`
		}
		_ = json.Unmarshal(j.Payload, &p)
		mu.Lock()
		latencies = append(latencies, now.Sub(time.Unix(0, p.At)))
		mu.Unlock()
		got <- struct{}{}
		return nil, nil
	}))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := workers.NewPool(workers.Config{WorkerID: "bench", PollInterval: time.Second}, store, reg, logger)
	listener := db.NewListener(u, logger, 0)
	listener.Handle(db.ChannelJobs, pool.Wake)
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() { connected <- struct{}{} })
	go func() { _ = listener.Run(ctx) }()
	<-connected
	go func() { _ = pool.Run(ctx) }()

	b.ResetTimer()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; i < n; i++ {
		<-tick.C
		payload, _ := json.Marshal(map[string]int64{"at": time.Now().UnixNano()})
		if _, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "probe", Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	for range n {
		select {
		case <-got:
		case <-time.After(time.Minute):
			b.Fatal("jobs were not picked up")
		}
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1.0), "max-ms")
}

// BenchmarkPickupIdle: one job every 20 ms on an idle system.
func BenchmarkPickupIdle(b *testing.B) {
	for b.Loop() {
		pickupBench(b, 20*time.Millisecond, 300)
	}
}

// BenchmarkPickupAt500PerSecond: a steady 500 jobs/s for 10 s.
func BenchmarkPickupAt500PerSecond(b *testing.B) {
	for b.Loop() {
		pickupBench(b, 2*time.Millisecond, 5000)
	}
}
