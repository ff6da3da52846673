package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
)

// The job every mode inserts and works: a no-op that records, for timed
// jobs, how long after their insert it started.

type NoopArgs struct {
	T int64  `json:"t,omitempty"` // unix nanos taken just before the Insert call (0 = not timed)
	K string `json:"k,omitempty"` // a distinct value per job for -unique inserts
}

func (NoopArgs) Kind() string { return "noop" }

type recorder struct {
	mu      sync.Mutex
	on      bool
	lat     []int64 // insert->start latencies (ns)
	started atomic.Int64
	notify  chan int64 // idle mode: receives latency of each started job
}

func (r *recorder) reset(on bool) {
	r.mu.Lock()
	r.on = on
	r.lat = r.lat[:0]
	r.mu.Unlock()
}

func (r *recorder) take() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]int64(nil), r.lat...)
	r.lat = r.lat[:0]
	return out
}

var rec = &recorder{}

type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
}

func (w *NoopWorker) Work(ctx context.Context, j *river.Job[NoopArgs]) error {
	rec.started.Add(1)
	if j.Args.T != 0 {
		d := time.Now().UnixNano() - j.Args.T
		rec.mu.Lock()
		if rec.on {
			rec.lat = append(rec.lat, d)
		}
		rec.mu.Unlock()
		if rec.notify != nil {
			select {
			case rec.notify <- d:
			default:
			}
		}
	}
	return nil
}
