package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// modeLatency runs an in-process pool wired as `flint worker` wires it
// (LISTEN/NOTIFY wakes it, events published) and measures enqueue ->
// handler start, either at a steady rate or one job at a time at idle.
func modeLatency(ctx context.Context, idle bool) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var rds *db.Redis
	if *flagRedis != "" {
		var err error
		rds, err = db.OpenRedis(ctx, *flagRedis, redisPrefix(), logger)
		must(err)
		defer rds.Close()
		s.SetRedis(rds)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := startProbePool(ctx, s, rds, dbURL, logger)
	e := &probeEnqueuer{s: s}
	if idle {
		e.offerIdle(ctx, p)
	} else {
		e.offerRate(ctx, p)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.Sort(p.lats)
	pct := func(q float64) float64 { return float64(p.lats[int(q*float64(len(p.lats)-1))]) / 1e6 }
	what := "latency"
	if idle {
		what = "idle"
	}
	slices.Sort(e.calls)
	fmt.Printf("%s %s jobs=%d: enqueue->start p50=%.2fms p90=%.2fms p99=%.2fms max=%.2fms | Enqueue call p50=%.2fms\n", what, *flagLabel, len(p.lats), pct(0.5), pct(0.9), pct(0.99), pct(1),
		float64(e.calls[len(e.calls)/2])/1e6)
	fmt.Printf("RESULT flint %s %s p50_ms=%.2f p99_ms=%.2f\n", what, *flagLabel, pct(0.5), pct(0.99))
}

// probePool records, for every probe job its pool starts, how long after
// its enqueue (the time in its payload) the handler began.
type probePool struct {
	mu      sync.Mutex
	lats    []time.Duration
	started chan time.Duration
}

// startProbePool starts an event bus, a LISTEN/NOTIFY listener and a pool
// running probe jobs, as `flint worker` wires them, and returns once the
// pool has had a second to settle.
func startProbePool(ctx context.Context, s *db.Store, rds *db.Redis, dbURL string, logger *slog.Logger) *probePool {
	bus := db.NewEventBus(s, rds, false, logger, nil)
	s.SetEventSink(bus)
	go func() { _ = bus.Run(ctx) }()
	if rds != nil {
		go func() { _ = rds.Run(ctx) }()
	}

	p := &probePool{started: make(chan time.Duration, 1<<16)}
	reg := jobs.NewRegistry()
	reg.Register("probe", jobs.HandlerFunc(p.handle))
	pool := workers.NewPool(workers.Config{WorkerID: "flintbench"}, s, reg, logger)
	listener := db.NewListener(dbURL, logger, 0)
	listener.Handle(db.ChannelJobs, pool.Wake)
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() {
		pool.Wake("")
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	go func() { _ = listener.Run(ctx) }()
	<-connected
	go func() { _ = pool.Run(ctx) }()
	time.Sleep(time.Second)
	return p
}

// handle is the probe job's handler.
func (p *probePool) handle(_ context.Context, j *jobs.Job) (any, error) {
	now := time.Now()
	var pl struct {
		At int64 `json:"at"`
	}
	_ = json.Unmarshal(j.Payload, &pl)
	d := now.Sub(time.Unix(0, pl.At))
	p.mu.Lock()
	p.lats = append(p.lats, d)
	p.mu.Unlock()
	p.started <- d
	return nil, nil
}

// startedCount is how many probe jobs have started.
func (p *probePool) startedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lats)
}

// probeEnqueuer enqueues probe jobs and records how long each Enqueue
// call took.
type probeEnqueuer struct {
	s     *db.Store
	mu    sync.Mutex
	calls []time.Duration
}

func (e *probeEnqueuer) enqueue(ctx context.Context) {
	t := time.Now()
	payload := fmt.Appendf(nil, `{"at":%d}`, t.UnixNano())
	_, err := e.s.Enqueue(ctx, jobs.EnqueueParams{Type: "probe", Payload: payload})
	must(err)
	e.mu.Lock()
	e.calls = append(e.calls, time.Since(t))
	e.mu.Unlock()
}

// offerIdle enqueues -samples probes one at a time, each after a pause
// that lets the pool go idle, and waits for each to start.
func (e *probeEnqueuer) offerIdle(ctx context.Context, p *probePool) {
	for range *flagSamples {
		time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond) // as riverbench: let the pool go idle
		e.enqueue(ctx)
		select {
		case <-p.started:
		case <-time.After(10 * time.Second):
			log.Fatal("idle: job not started within 10 s")
		}
	}
}

// offerRate enqueues probes at -rate a second for -duration and waits
// until every one has started.
func (e *probeEnqueuer) offerRate(ctx context.Context, p *probePool) {
	var sent int
	// riverbench offers the rate through 32 inserting goroutines.
	work := make(chan struct{}, 128)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range work {
				e.enqueue(ctx)
			}
		})
	}
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	for now := range tick.C {
		el := now.Sub(start)
		if el >= *flagDuration {
			break
		}
		for want := int(el.Seconds() * float64(*flagRate)); sent < want; sent++ {
			work <- struct{}{}
		}
	}
	tick.Stop()
	close(work)
	wg.Wait()
	deadline := time.After(time.Minute)
	for {
		n := p.startedCount()
		if n >= sent {
			break
		}
		select {
		case <-deadline:
			log.Fatalf("latency: %d of %d started", n, sent)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
