package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// The durable-execution benchmarks, each the Flint side of a mode of the
// DBOS harness (../shared/peers/dbosbench), on the same PostgreSQL:
//
//	go test -run '^$' -bench 'BenchmarkDurable' -benchtime 1x ./internal/e2e
//
// Each run is on a fresh database, with one in-process pool of
// durableWorkers workers (DBOS's -conc 100: as many jobs running at once
// as DBOS lets its queue run workflows), a promoter (the scheduler's
// timer index) and a listener, as `flint serve` runs them.

// durableWorkers is the pool's size in the durable benchmarks.
const durableWorkers = 100

// durableEnv is a fresh database with a pool, a promoter and a listener
// running: reg registers the handlers, and onMoved sees every finish.
type durableEnv struct {
	store *db.Store
	pool  *workers.Pool
	stop  func()
}

func startDurable(b *testing.B, workersN int, reg func(*jobs.Registry), onMoved func([]domain.Moved)) *durableEnv {
	b.Helper()
	store, u := dbtest.NewStore(b)
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus := db.NewEventBus(store, nil, false, logger, nil)
	store.SetEventSink(bus)
	go func() { _ = bus.Run(ctx) }()
	r := jobs.NewRegistry()
	domain.RegisterBuiltins(r, domain.BuiltinDeps{})
	reg(r)
	pool := workers.NewPool(workers.Config{WorkerID: "bench", Workers: workersN, OnMoved: onMoved}, store, r, logger)
	promoter := scheduler.NewPromoter(scheduler.PromoterConfig{}, store, logger)
	listener := db.NewListener(u, logger, 0)
	listener.Handle(db.ChannelJobs, pool.Wake)
	listener.Handle(db.ChannelScheduled, promoter.Notify)
	listener.OnConnect(promoter.Resync)
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() {
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	var wg sync.WaitGroup
	wg.Go(func() { _ = listener.Run(ctx) })
	<-connected
	wg.Go(func() { _ = promoter.Run(ctx) })
	wg.Go(func() { _ = pool.Run(ctx) })
	return &durableEnv{store: store, pool: pool, stop: func() {
		cancel()
		wg.Wait()
		store.Close()
	}}
}

// completions counts completed jobs and closes all when total are.
func completions(total int64, at func(domain.Moved)) (func([]domain.Moved), <-chan struct{}) {
	var done atomic.Int64
	all := make(chan struct{})
	return func(ms []domain.Moved) {
		n := int64(0)
		for _, m := range ms {
			if m.Status == jobs.StateCompleted {
				if at != nil {
					at(m)
				}
				n++
			}
		}
		if done.Add(n) == total {
			close(all)
		}
	}, all
}

func waitAll(b *testing.B, all <-chan struct{}, d time.Duration, what string) {
	b.Helper()
	select {
	case <-all:
	case <-time.After(d):
		b.Fatalf("%s: not all done after %s", what, d)
	}
}

// BenchmarkDurableSteps measures what recorded steps cost: 10,000 jobs
// enqueued in one batch, each recording three no-op steps (jobs.Step
// returning 1) and returning their sum, timed from the enqueue to the
// last completion: steps-jobs/s is the figure to set beside DBOS's
// three-step workflows per second (dbosbench -mode steps -poll 100ms).
// The same 10,000 noop jobs are drained in the same pool before or after
// (alternating), and step-ratio is the steps workload's time over
// theirs; steps/commit is how many steps one statement recorded on
// average.
//
// make bench BENCH=DurableSteps BENCHPKG=./internal/e2e BENCHTIME=3x
func BenchmarkDurableSteps(b *testing.B) {
	var noop, steps time.Duration
	var batches, recorded uint64
	round := 0
	for b.Loop() {
		b.StopTimer()
		if round%2 == 0 {
			noop += durableDrain(b, false, nil, nil)
			steps += durableDrain(b, true, &batches, &recorded)
		} else {
			steps += durableDrain(b, true, &batches, &recorded)
			noop += durableDrain(b, false, nil, nil)
		}
		round++
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(10_000/(noop.Seconds()/n), "noop-jobs/s")
	b.ReportMetric(10_000/(steps.Seconds()/n), "steps-jobs/s")
	b.ReportMetric(30_000/(steps.Seconds()/n), "steps/s")
	b.ReportMetric(steps.Seconds()/noop.Seconds(), "step-ratio")
	b.ReportMetric(float64(recorded)/float64(max(batches, 1)), "steps/commit")
}

// durableDrain runs 10,000 jobs (three steps each, or noop) on a fresh
// database and returns the time from the enqueue to the last completion.
func durableDrain(b *testing.B, withSteps bool, batches, recorded *uint64) time.Duration {
	const total = 10_000
	onMoved, all := completions(total, nil)
	env := startDurable(b, durableWorkers, func(r *jobs.Registry) {
		one := func(context.Context) (int, error) { return 1, nil }
		r.Register("three-steps", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
			sum := 0
			for _, name := range []string{"one", "two", "three"} {
				v, err := jobs.Step(ctx, name, one)
				if err != nil {
					return nil, err
				}
				sum += v
			}
			return sum, nil
		}))
	}, onMoved)
	defer env.stop()
	typ := jobs.TypeNoop
	if withSteps {
		typ = "three-steps"
	}
	params := make([]jobs.EnqueueParams, total)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: typ, Queue: jobs.DefaultQueue, Priority: 2, Payload: json.RawMessage(`{}`)}
	}
	began := time.Now()
	if _, err := env.store.Enqueue(context.Background(), params...); err != nil {
		b.Fatal(err)
	}
	waitAll(b, all, 10*time.Minute, "steps")
	took := time.Since(began)
	if withSteps {
		bt, st := env.store.StepCommits()
		*batches += bt
		*recorded += st
		if st != 3*total {
			b.Fatalf("recorded %d steps, want %d", st, 3*total)
		}
	}
	return took
}

// BenchmarkDurableSleep: 10,000 jobs each sleep (jobs.Sleep) for
// durableSleep once, all asleep at once; the figures are the wake
// lateness (the wake time the sleep recorded → the handler past Sleep on
// its next run), to set beside dbosbench -mode sleep -sleep 60s, and what
// the sleepers held while all slept: worker slots (running), pool
// connections in use, and goroutines over the idle pool's.
//
// How the sleepers are enqueued decides how close together their wake
// times fall, since each records its wake time when it first runs:
//
//   - enqueuers=16: 16 goroutines enqueue one job at a time, as the DBOS
//     harness starts its workflows (16 goroutines, one RunWorkflow
//     each), the like-for-like setting;
//   - enqueuers=batch: one call enqueues all 10,000. The pool then runs
//     them in claims of up to 900, each sleeper in microseconds, so the
//     wake times come in bursts of hundreds within a few milliseconds,
//     and the last of a burst wakes as late as the pool takes to run
//     the burst again: the lateness measures the pool's throughput more
//     than its timers.
func BenchmarkDurableSleep(b *testing.B) {
	for _, enqueuers := range []int{16, 0} {
		name := "enqueuers=" + strconv.Itoa(enqueuers)
		if enqueuers == 0 {
			name = "enqueuers=batch"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				durableSleep(b, 10_000, 60*time.Second, enqueuers)
			}
		})
	}
}

func durableSleep(b *testing.B, n int, d time.Duration, enqueuers int) {
	late := make([]float64, n)
	claimed := make([]float64, n) // how long before its wake time each was claimed again
	var asleep atomic.Int64
	onMoved, all := completions(int64(n), nil)
	env := startDurable(b, durableWorkers, func(r *jobs.Registry) {
		r.Register("nap", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
			if err := jobs.Sleep(ctx, "nap", d); err != nil {
				asleep.Add(1)
				return nil, err
			}
			now := time.Now()
			var wake struct {
				WakeAt time.Time `json:"wake_at"`
			}
			if len(j.Steps) != 1 || json.Unmarshal(j.Steps[0].Result, &wake) != nil {
				return nil, jobs.Permanent(fmt.Errorf("no sleep recorded: %v", j.Steps))
			}
			i, _ := strconv.Atoi(string(j.Payload))
			late[i] = float64(now.Sub(wake.WakeAt).Microseconds()) / 1000
			claimed[i] = float64(wake.WakeAt.Sub(j.UpdatedAt).Microseconds()) / 1000
			return nil, nil
		}))
	}, onMoved)
	defer env.stop()
	time.Sleep(100 * time.Millisecond) // the pool's own goroutines are up
	g0 := runtime.NumGoroutine()
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "nap", Queue: jobs.DefaultQueue, Payload: json.RawMessage(strconv.Itoa(i))}
	}
	began := time.Now()
	enqueueFrom(b, env.store, params, enqueuers)
	deadline := time.Now().Add(d)
	for asleep.Load() < int64(n) || env.pool.Running() > 0 {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d jobs asleep after %s", asleep.Load(), n, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitWaiting(b, env.store, n) // the last suspensions are written
	fellAsleep := time.Since(began)
	running, conns, goroutines := env.pool.Running(), env.store.Pool().Stat().AcquiredConns(), runtime.NumGoroutine()-g0
	waitAll(b, all, d+5*time.Minute, "sleep")
	slices.Sort(late)
	slices.Sort(claimed)
	b.Logf("claimed again before their wake time (scheduler.DefaultPromoteAhead): p1 %.1f ms, p50 %.1f ms, p99 %.1f ms",
		pct(claimed, 1), pct(claimed, 50), pct(claimed, 99))
	b.Logf("%d jobs asleep (waiting rows) after %.2fs; while all slept: %d slots running, %d connections in use, %+d goroutines",
		n, fellAsleep.Seconds(), running, conns, goroutines)
	b.ReportMetric(fellAsleep.Seconds(), "asleep-after-s")
	b.ReportMetric(pct(late, 50), "lateness-p50-ms")
	b.ReportMetric(pct(late, 99), "lateness-p99-ms")
	b.ReportMetric(float64(running), "slots-held")
	b.ReportMetric(float64(conns), "conns-held")
}

// BenchmarkDurableSignal: 1,000 jobs wait for a signal (jobs.
// WaitForSignal); once all wait, senders send each its signal
// (Store.SendSignal, then a wake of the pool, as the API does in flint
// serve). Two latencies from the send's return: to the handler resumed
// (WaitForSignal returned the signal: the issue's "signal → resumed
// handler"), and to the job's completion committed (the handler resumed
// and returned, like for like with DBOS's Send → GetResult); rate is the
// signals over first send → last completion. With 1 sender it is
// dbosbench -mode signal's setting, with 16 -senders 16.
func BenchmarkDurableSignal(b *testing.B) {
	for _, senders := range []int{1, 16} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			for b.Loop() {
				durableSignal(b, 1000, senders)
			}
		})
	}
}

func durableSignal(b *testing.B, n, senders int) {
	done, resumed := make([]time.Time, n), make([]time.Time, n)
	index := map[uuid.UUID]int{}
	var mu sync.Mutex
	onMoved, all := completions(int64(n), func(m domain.Moved) {
		mu.Lock()
		defer mu.Unlock()
		if i, ok := index[m.JobID]; ok {
			done[i] = time.Now()
		}
	})
	env := startDurable(b, durableWorkers, func(r *jobs.Registry) {
		r.Register("await", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
			sig, err := jobs.WaitForSignal(ctx, "go", 0)
			if err != nil {
				return nil, err
			}
			if i, err := strconv.Atoi(string(sig.Body)); err == nil && i >= 0 && i < n {
				resumed[i] = time.Now()
			}
			return sig.Body, nil
		}))
	}, onMoved)
	defer env.stop()
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "await", Queue: jobs.DefaultQueue, Payload: json.RawMessage(`{}`)}
	}
	ctx := context.Background()
	enq, err := env.store.Enqueue(ctx, params...)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]uuid.UUID, n)
	mu.Lock()
	for i, e := range enq {
		ids[i] = e.Job.ID
		index[e.Job.ID] = i
	}
	mu.Unlock()
	waitWaiting(b, env.store, n)
	sent := make([]time.Time, n)
	next := atomic.Int64{}
	first := time.Now()
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				_, resumed, err := env.store.SendSignal(ctx, ids[i], "go", "", []byte(strconv.Itoa(i)))
				sent[i] = time.Now()
				if err != nil || !resumed {
					b.Errorf("signal %d: resumed %v, %v", i, resumed, err)
				}
				env.pool.Wake(jobs.DefaultQueue) // as the API's signal handler does in flint serve
			}
		})
	}
	wg.Wait()
	waitAll(b, all, 5*time.Minute, "signal")
	mu.Lock()
	defer mu.Unlock()
	reportSignals(b, first, sent, resumed, done)
}
