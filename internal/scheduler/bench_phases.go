package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// benchPhase is one operation kind: setup builds the index it starts from
// (not measured), step(ix, i) performs operation i of ops.
type benchPhase struct {
	name  string
	ops   int
	setup func() Index
	step  func(ix Index, i int)
	check func(ix Index) error // after the ops, optional
}

// phases returns the phases for one algorithm, in the order of the Bench*
// constants above.
func (wl *workload) phases(alg string) []benchPhase {
	newIx := func() Index {
		ix, err := NewIndex(alg, benchStart)
		if err != nil {
			panic(err) // validated by the caller
		}
		return ix
	}
	full := func() Index {
		ix := newIx()
		for _, e := range wl.all[:wl.n] {
			ix.Upsert(e)
		}
		return ix
	}
	return []benchPhase{
		wl.insertPhase(newIx),
		wl.popPhase(full),
		wl.rescorePhase(full),
		wl.cancelPhase(full),
		wl.mixedPhase(full),
	}
}

// insertPhase upserts the initial entries into an empty index.
func (wl *workload) insertPhase(empty func() Index) benchPhase {
	return benchPhase{
		name: BenchInsert, ops: wl.n, setup: empty,
		step:  func(ix Index, i int) { ix.Upsert(wl.all[i]) },
		check: func(ix Index) error { return expectLen(ix, wl.n) },
	}
}

// popPhase drains a full index, advancing time whenever nothing is due;
// each op hands out one entry of the last batch PopDue returned.
func (wl *workload) popPhase(full func() Index) benchPhase {
	var (
		popNow time.Time
		popBuf []Entry
	)
	return benchPhase{
		name: BenchPop, ops: wl.n,
		setup: func() Index {
			popNow, popBuf = benchStart, nil
			return full()
		},
		step: func(ix Index, _ int) {
			for len(popBuf) == 0 {
				if popBuf = ix.PopDue(popNow, benchPopBatch); len(popBuf) == 0 {
					popNow = popNow.Add(benchPopStep)
				}
			}
			popBuf = popBuf[1:]
		},
		check: func(ix Index) error { return expectLen(ix, 0) },
	}
}

// rescorePhase ages the chosen tenth of a full index round after round.
func (wl *workload) rescorePhase(full func() Index) benchPhase {
	n := wl.n
	// aged holds the current priority of each aged entry.
	aged := make([]float64, len(wl.rescore))
	rescore := func(ix Index, i int) {
		k := i % len(wl.rescore)
		aged[k] = max(1, aged[k]-0.1)
		e := wl.all[wl.rescore[k]]
		e.Priority = aged[k]
		ix.Upsert(e)
	}
	return benchPhase{
		name: BenchRescore, ops: n,
		setup: func() Index {
			for k, idx := range wl.rescore {
				aged[k] = wl.all[idx].Priority
			}
			ix := full()
			// One round first, not measured, so the measured one
			// finds the index as a long-running one has it: its
			// slices grown, as many stale nodes as live ones, and
			// the compaction that this round causes included.
			for i := range n {
				rescore(ix, i)
			}
			return ix
		},
		step:  func(ix Index, i int) { rescore(ix, n+i) },
		check: func(ix Index) error { return expectLen(ix, n) },
	}
}

// cancelPhase removes half the entries of a full index.
func (wl *workload) cancelPhase(full func() Index) benchPhase {
	return benchPhase{
		name: BenchCancel, ops: len(wl.cancel), setup: full,
		step: func(ix Index, i int) { ix.Remove(wl.all[wl.cancel[i]].ID) },
		check: func(ix Index) error {
			return expectLen(ix, wl.n-len(wl.cancel))
		},
	}
}

// mixedPhase replays the script genScript drew on a full index.
func (wl *workload) mixedPhase(full func() Index) benchPhase {
	return benchPhase{
		name: BenchMixed, ops: len(wl.script), setup: full,
		step: func(ix Index, i int) {
			op := wl.script[i]
			switch op.kind {
			case mixedInsert:
				ix.Upsert(wl.all[op.idx])
			case mixedPop:
				ix.PopDue(mixedNow(i), benchMixedPop)
			case mixedRescore:
				e := wl.all[op.idx]
				e.Priority = op.prio
				ix.Upsert(e)
			case mixedCancel:
				ix.Remove(wl.all[op.idx].ID)
			}
		},
		check: func(ix Index) error { return expectLen(ix, wl.mixedN) },
	}
}

func expectLen(ix Index, want int) error {
	if got := ix.Len(); got != want {
		return fmt.Errorf("index holds %d entries after the phase, expected %d", got, want)
	}
	return nil
}

// A phase is repeated, each time from a freshly built index, until the
// measured time reaches benchMinTime (or benchMaxRuns runs): a single run
// of 10k operations lasts a few milliseconds, where one collection or page
// fault shows as tens of percent.
const (
	benchMinTime = 100 * time.Millisecond
	benchMaxRuns = 100
)

// measure runs the phase and reports its cost per operation, averaged over
// every run (the caller fills in the algorithm and size).
func (p benchPhase) measure(ctx context.Context) (domain.BenchResult, error) {
	var (
		elapsed       time.Duration
		allocs, bytes uint64
		runs          int
	)
	for runs == 0 || (elapsed < benchMinTime && runs < benchMaxRuns) {
		if err := ctx.Err(); err != nil {
			return domain.BenchResult{}, err
		}
		ix := p.setup()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		for i := range p.ops {
			p.step(ix, i)
		}
		elapsed += time.Since(start)
		runtime.ReadMemStats(&after)
		allocs += after.Mallocs - before.Mallocs
		bytes += after.TotalAlloc - before.TotalAlloc
		if p.check != nil {
			if err := p.check(ix); err != nil {
				return domain.BenchResult{}, err
			}
		}
		runs++
	}
	ops := float64(runs * p.ops)
	return domain.BenchResult{
		Op:          p.name,
		NsPerOp:     float64(elapsed.Nanoseconds()) / ops,
		AllocsPerOp: float64(allocs) / ops,
		BytesPerOp:  float64(bytes) / ops,
	}, nil
}
