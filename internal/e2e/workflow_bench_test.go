package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkWorkflowData measures what carrying data along workflows costs,
// against the same work without it, in one run on one PostgreSQL. Each
// workload runs on a fresh database with one in-process pool at its
// default settings (as `flint serve` runs it), timed from the moment the
// work is submitted, with the pool already running, to the last job's
// completion; the order rotates from round to round:
//
//   - noop: 10,000 independent noop jobs submitted in one batch (the
//     baseline of the fan-out and the batch);
//   - fanout: one job that spawns 10,000 leaves with its completion
//     (fanout-ratio = its time over noop's: the target is at most 1.2);
//   - batch: a batch of 10,000 noop members with an on_success callback,
//     to the callback's completion (batch-ratio, at most 1.2);
//   - chain-read and chain-plain: 1,000 three-job chains, each child
//     reading its parent's result and returning one, against the same
//     chains returning and reading nothing (chain-ratio = read's rate
//     over plain's, at least 0.9).
//
// make bench BENCH=WorkflowData BENCHPKG=./internal/e2e BENCHTIME=3x
func BenchmarkWorkflowData(b *testing.B) {
	runs := []struct {
		name string
		run  func(b *testing.B) time.Duration
		sum  time.Duration
	}{
		{name: "noop", run: func(b *testing.B) time.Duration { return wfDrain(b, wfNoops) }},
		{name: "fanout", run: func(b *testing.B) time.Duration { return wfDrain(b, wfFanOut) }},
		{name: "batch", run: func(b *testing.B) time.Duration { return wfDrain(b, wfBatch) }},
		{name: "chain-read", run: func(b *testing.B) time.Duration { return wfDrain(b, wfChains(true)) }},
		{name: "chain-plain", run: func(b *testing.B) time.Duration { return wfDrain(b, wfChains(false)) }},
	}
	round := 0
	for b.Loop() {
		for i := range runs {
			r := &runs[(i+round)%len(runs)]
			r.sum += r.run(b)
		}
		round++
	}
	at := func(name string) float64 {
		for _, r := range runs {
			if r.name == name {
				return r.sum.Seconds() / float64(b.N)
			}
		}
		panic(name)
	}
	b.ReportMetric(10_000/at("noop"), "noop-jobs/s")
	b.ReportMetric(10_001/at("fanout"), "fanout-jobs/s")
	b.ReportMetric(10_001/at("batch"), "batch-jobs/s")
	b.ReportMetric(1000/at("chain-read"), "read-chains/s")
	b.ReportMetric(1000/at("chain-plain"), "plain-chains/s")
	b.ReportMetric(at("fanout")/at("noop"), "fanout-ratio")
	b.ReportMetric(at("batch")/at("noop"), "batch-ratio")
	b.ReportMetric(at("chain-plain")/at("chain-read"), "chain-ratio")
}

// wfWorkload prepares a drain on store and registry (untimed) and
// returns the jobs to wait for and the submission, which the clock times.
type wfWorkload func(b *testing.B, store *db.Store, reg *jobs.Registry) (total int64, submit func())

// wfDrain runs one workload on a fresh database and returns the time from
// its submission to the last awaited completion.
func wfDrain(b *testing.B, w wfWorkload) time.Duration {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	store, u := dbtest.NewStore(b)
	defer store.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus := db.NewEventBus(store, nil, false, logger, nil)
	store.SetEventSink(bus)
	go func() { _ = bus.Run(ctx) }()
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	total, submit := w(b, store, reg)
	var done atomic.Int64
	all := make(chan struct{})
	pool := workers.NewPool(workers.Config{WorkerID: "bench", OnMoved: func(ms []domain.Moved) {
		n := int64(0)
		for _, m := range ms {
			if m.Status == jobs.StateCompleted {
				n++
			}
		}
		if done.Add(n) == total {
			close(all)
		}
	}}, store, reg, logger)
	listener := db.NewListener(u, logger, 0)
	listener.Handle(db.ChannelJobs, pool.Wake)
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() { connected <- struct{}{} })
	go func() { _ = listener.Run(ctx) }()
	<-connected
	go func() { _ = pool.Run(ctx) }()
	b.StartTimer()
	began := time.Now()
	submit()
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("completed %d of %d", done.Load(), total)
	}
	return time.Since(began)
}

// wfEnqueue enqueues params in one call, as one API request would.
func wfEnqueue(b *testing.B, store *db.Store, params []jobs.EnqueueParams) {
	if _, err := store.Enqueue(context.Background(), params...); err != nil {
		b.Fatal(err)
	}
}

func wfNoops(b *testing.B, store *db.Store, _ *jobs.Registry) (int64, func()) {
	params := make([]jobs.EnqueueParams, 10_000)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: jobs.DefaultQueue, Priority: 2, Payload: json.RawMessage(`{}`)}
	}
	return 10_000, func() { wfEnqueue(b, store, params) }
}

func wfFanOut(b *testing.B, store *db.Store, reg *jobs.Registry) (int64, func()) {
	reg.Register("spawner", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
		specs := make([]jobs.SpawnJob, 10_000)
		for i := range specs {
			specs[i] = jobs.SpawnJob{Key: fmt.Sprintf("leaf-%d", i), Type: jobs.TypeNoop, DependsOn: []string{jobs.Self}}
		}
		return nil, jobs.Spawn(ctx, specs...)
	}))
	return 10_001, func() {
		wfEnqueue(b, store, []jobs.EnqueueParams{{Type: "spawner", Queue: jobs.DefaultQueue, Priority: 2}})
	}
}

func wfBatch(b *testing.B, store *db.Store, _ *jobs.Registry) (int64, func()) {
	p := domain.BatchParams{Callbacks: map[string]jobs.EnqueueParams{domain.OnSuccess: {Type: jobs.TypeNoop, Queue: jobs.DefaultQueue, Priority: 2}}}
	p.Jobs = make([]jobs.EnqueueParams, 10_000)
	for i := range p.Jobs {
		p.Jobs[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: jobs.DefaultQueue, Priority: 2}
	}
	return 10_001, func() {
		if _, _, err := store.CreateBatch(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
}

// wfChains submits 1,000 workflows a → b → c, 333 to a request; with
// read, each job returns a result and each child reads its parent's.
func wfChains(read bool) wfWorkload {
	return func(b *testing.B, store *db.Store, reg *jobs.Registry) (int64, func()) {
		reg.Register("link", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
			if !read {
				return nil, nil
			}
			n := 0
			if parents := jobs.ParentsOf(ctx); len(parents) > 0 {
				in, err := jobs.ParentResult[struct{ N int }](ctx, parents.Keys()[0])
				if err != nil {
					return nil, err
				}
				n = in.N
			}
			return map[string]int{"n": n + 1}, nil
		}))
		var params []jobs.EnqueueParams
		for range 1000 {
			wf := uuid.Must(uuid.NewV7())
			ids := [3]uuid.UUID{uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())}
			for k, key := range []string{"a", "b", "c"} {
				p := jobs.EnqueueParams{Type: "link", Queue: jobs.DefaultQueue, Priority: 2, Payload: json.RawMessage(`{}`),
					ID: ids[k], StepKey: key, WorkflowID: wf}
				if k > 0 {
					p.DependsOn = []uuid.UUID{ids[k-1]}
				}
				params = append(params, p)
			}
		}
		return 3000, func() {
			for i := 0; i < len(params); i += 999 {
				wfEnqueue(b, store, params[i:min(i+999, len(params))])
			}
		}
	}
}
