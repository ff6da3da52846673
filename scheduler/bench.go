package scheduler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
)

// BenchConfig configures RunBench.
type BenchConfig struct {
	// N is the index size when Sizes is empty; 1..MaxBenchN.
	N int
	// Algorithms to compare; empty means both strategies.
	Algorithms []string
	// Sizes to run at; empty means {N}. Each is 1..MaxBenchN.
	Sizes []int
	// Seed makes the workload reproducible; the same seed gives the same
	// entries and operations to every algorithm.
	Seed int64
}

// MaxBenchN is the largest index size RunBench accepts.
const MaxBenchN = 2_000_000

// The operations RunBench measures, in order.
const (
	BenchInsert  = "insert"
	BenchPop     = "pop"
	BenchRescore = "rescore"
	BenchCancel  = "cancel"
	BenchMixed   = "mixed"
)

// RunBench measures every algorithm at every size on the same seeded
// workload, one operation kind (phase) at a time:
//
//	insert   N upserts of fresh entries, priorities uniform in [1, 3], RunAt
//	         spread over the next two hours (so half go beyond the wheel's
//	         hour, to its overflow), into an empty index.
//	pop      from that full index, time advances a minute at a time and
//	         PopDue drains what is due in batches of 100; cost per entry.
//	rescore  aging on a full index (nothing due yet): a random 10% of the
//	         entries get their priority lowered by 0.1 (not below 1.0)
//	         again and again, N upserts in all. The index has been through
//	         one such round already (not measured), as a long-running one
//	         would have: the measured round pays for the one compaction of
//	         stale nodes it causes, not for first growth.
//	cancel   Remove of N/2 random entries of a full index.
//	mixed    N operations on an index of N entries while time advances 1 s
//	         per 1,000 operations: 60% upserts of entries due within 10 s,
//	         25% PopDue of up to 4 due entries, 10% re-scores of a random
//	         live entry, 5% removals of one.
//
// Each phase starts from an index built beforehand (not measured) and runs
// again, from a new one, until it has been measured for at least 100 ms;
// the figures are averages over those runs. ns/op is wall time;
// allocations and bytes are the process-wide runtime.MemStats deltas over
// the runs (each after a GC), so they are only clean in an otherwise idle
// process. There is one result per size, algorithm and operation, in that
// order. ctx is checked between phases and between runs of a phase; on
// cancellation RunBench returns what it finished and the context's error.
// Memory: the workload (about 1.6×N entries and the scripted operations),
// the index and garbage from rebuilding it; the process peaked at 1.9 GB
// resident at N = 2M.
func RunBench(ctx context.Context, cfg BenchConfig) ([]jobs.BenchResult, error) {
	algs, sizes, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	var out []jobs.BenchResult
	for _, size := range sizes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		wl, err := newWorkload(size, cfg.Seed)
		if err != nil {
			return out, err
		}
		for _, alg := range algs {
			for _, p := range wl.phases(alg) {
				if err := ctx.Err(); err != nil {
					return out, err
				}
				r, err := p.measure(ctx)
				if err != nil {
					return out, fmt.Errorf("%s %s n=%d: %w", alg, p.name, size, err)
				}
				r.Algorithm, r.Size = alg, size
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func (cfg BenchConfig) validate() ([]string, []int, error) {
	var errs []error
	if cfg.N < 1 || cfg.N > MaxBenchN {
		errs = append(errs, fmt.Errorf("n must be between 1 and %d, got %d", MaxBenchN, cfg.N))
	}
	sizes := cfg.Sizes
	if len(sizes) == 0 {
		sizes = []int{cfg.N}
	}
	for _, s := range cfg.Sizes {
		if s < 1 || s > MaxBenchN {
			errs = append(errs, fmt.Errorf("size must be between 1 and %d, got %d", MaxBenchN, s))
		}
	}
	algs := cfg.Algorithms
	if len(algs) == 0 {
		algs = Strategies()
	}
	var seen []string
	for _, a := range algs {
		if !slices.Contains(Strategies(), a) {
			errs = append(errs, fmt.Errorf("unknown algorithm %q (valid: %q, %q)", a, StrategyHeap, StrategyTimingWheel))
			continue
		}
		if !slices.Contains(seen, a) {
			seen = append(seen, a)
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return seen, sizes, nil
}

// FormatBenchTable renders results as a plain-text table.
func FormatBenchTable(results []jobs.BenchResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\tsize\top\tns/op\tallocs/op\tB/op\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.3f\t%.1f\t\n", r.Algorithm, r.Size, r.Op, r.NsPerOp, r.AllocsPerOp, r.BytesPerOp)
	}
	_ = tw.Flush() // into a strings.Builder, which cannot fail
	return b.String()
}

// --- the workload, shared by RunBench and the Go benchmarks ---

// benchStart is the workload's fixed starting time.
var benchStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	benchSpread     = 2 * time.Hour    // RunAt of the initial entries: [start, start+spread)
	benchPopStep    = time.Minute      // pop phase: time advances this much when nothing is due
	benchPopBatch   = 100              // pop phase: PopDue's max
	benchMixedTick  = 1000             // mixed: operations per simulated second
	benchMixedAhead = 10 * time.Second // mixed: inserts are due within this
	benchMixedPop   = 4                // mixed: PopDue's max
)

type mixedKind uint8

const (
	mixedInsert mixedKind = iota
	mixedPop
	mixedRescore
	mixedCancel
)

// mixedOp is one scripted operation; idx points into workload.all.
type mixedOp struct {
	kind mixedKind
	idx  int32
	prio float64 // for mixedRescore
}

// workload is everything one size needs, generated once from the seed so
// that every algorithm gets the same operations.
type workload struct {
	n       int
	all     []Entry   // all[:n] the initial entries, then the mixed inserts
	rescore []int32   // the 10% aged, indexes into all
	cancel  []int32   // the N/2 cancelled
	script  []mixedOp // the mixed phase
	mixedN  int       // live entries after the script
}

func newWorkload(n int, seed int64) (*workload, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	wl := &workload{n: n}
	wl.all = make([]Entry, n, n+n*65/100)
	for i := range n {
		wl.all[i] = benchEntry(rng, int32(i), benchStart.Add(time.Duration(rng.Int64N(int64(benchSpread)))))
	}
	perm := rng.Perm(n)
	wl.rescore = make([]int32, max(1, n/10))
	for i := range wl.rescore {
		wl.rescore[i] = int32(perm[i])
	}
	rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	wl.cancel = make([]int32, max(1, n/2))
	for i := range wl.cancel {
		wl.cancel[i] = int32(perm[i])
	}
	if err := wl.genScript(rng); err != nil {
		return nil, err
	}
	return wl, nil
}

// benchEntry makes an entry whose ID carries idx in its last four bytes
// (the rest random), so that a popped entry can be found in workload.all.
func benchEntry(rng *rand.Rand, idx int32, runAt time.Time) Entry {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[0:8], rng.Uint64())
	binary.BigEndian.PutUint32(id[8:12], rng.Uint32())
	binary.BigEndian.PutUint32(id[12:16], uint32(idx))
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return Entry{
		ID:        id,
		Priority:  1 + 2*rng.Float64(),
		RunAt:     runAt,
		CreatedAt: benchStart.Add(-time.Duration(rng.Int64N(int64(time.Hour)))),
	}
}

func benchIdx(id uuid.UUID) int32 { return int32(binary.BigEndian.Uint32(id[12:16])) }

// mixedNow is the simulated time at mixed operation i.
func mixedNow(i int) time.Time { return benchStart.Add(time.Duration(i/benchMixedTick) * time.Second) }

// genScript draws the mixed phase's operations. Which entries are live
// depends on what PopDue returned, so the script is simulated once on a
// heap index (both strategies return the same entries; the tests check
// that), and re-scores and removals always target live entries.
func (wl *workload) genScript(rng *rand.Rand) error {
	ix := newHeapIndex(benchStart)
	live := make([]int32, 0, wl.n*2)
	pos := make([]int32, wl.n, cap(wl.all)) // index in live, or -1
	prio := make([]float64, wl.n, cap(wl.all))
	for i := range wl.n {
		ix.Upsert(wl.all[i])
		pos[i] = int32(i)
		live = append(live, int32(i))
		prio[i] = wl.all[i].Priority
	}
	drop := func(idx int32) {
		p := pos[idx]
		last := live[len(live)-1]
		live[p] = last
		pos[last] = p
		live = live[:len(live)-1]
		pos[idx] = -1
	}
	wl.script = make([]mixedOp, wl.n)
	for i := range wl.script {
		now := mixedNow(i)
		x := rng.IntN(100)
		switch {
		case x < 60 || len(live) == 0:
			idx := int32(len(wl.all))
			e := benchEntry(rng, idx, now.Add(time.Duration(rng.Int64N(int64(benchMixedAhead)))))
			e.CreatedAt = now
			wl.all = append(wl.all, e)
			pos = append(pos, int32(len(live)))
			prio = append(prio, e.Priority)
			live = append(live, idx)
			ix.Upsert(e)
			wl.script[i] = mixedOp{kind: mixedInsert, idx: idx}
		case x < 85:
			for _, e := range ix.PopDue(now, benchMixedPop) {
				drop(benchIdx(e.ID))
			}
			wl.script[i] = mixedOp{kind: mixedPop}
		case x < 95:
			idx := live[rng.IntN(len(live))]
			prio[idx] = max(1, prio[idx]-0.1)
			e := wl.all[idx]
			e.Priority = prio[idx]
			ix.Upsert(e)
			wl.script[i] = mixedOp{kind: mixedRescore, idx: idx, prio: prio[idx]}
		default:
			idx := live[rng.IntN(len(live))]
			drop(idx)
			ix.Remove(wl.all[idx].ID)
			wl.script[i] = mixedOp{kind: mixedCancel, idx: idx}
		}
	}
	if ix.Len() != len(live) {
		return fmt.Errorf("bench script: index holds %d entries, expected %d", ix.Len(), len(live))
	}
	wl.mixedN = len(live)
	return nil
}

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
	n := wl.n

	// pop: a buffer of the last batch, handed out one entry per op.
	var (
		popNow time.Time
		popBuf []Entry
	)
	// rescore: the current priority of each aged entry.
	aged := make([]float64, len(wl.rescore))
	rescore := func(ix Index, i int) {
		k := i % len(wl.rescore)
		aged[k] = max(1, aged[k]-0.1)
		e := wl.all[wl.rescore[k]]
		e.Priority = aged[k]
		ix.Upsert(e)
	}

	return []benchPhase{
		{
			name: BenchInsert, ops: n, setup: newIx,
			step: func(ix Index, i int) { ix.Upsert(wl.all[i]) },
			check: func(ix Index) error {
				return expectLen(ix, n)
			},
		},
		{
			name: BenchPop, ops: n,
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
		},
		{
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
		},
		{
			name: BenchCancel, ops: len(wl.cancel), setup: full,
			step: func(ix Index, i int) { ix.Remove(wl.all[wl.cancel[i]].ID) },
			check: func(ix Index) error {
				return expectLen(ix, n-len(wl.cancel))
			},
		},
		{
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
		},
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
func (p benchPhase) measure(ctx context.Context) (jobs.BenchResult, error) {
	var (
		elapsed       time.Duration
		allocs, bytes uint64
		runs          int
	)
	for runs == 0 || (elapsed < benchMinTime && runs < benchMaxRuns) {
		if err := ctx.Err(); err != nil {
			return jobs.BenchResult{}, err
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
				return jobs.BenchResult{}, err
			}
		}
		runs++
	}
	ops := float64(runs * p.ops)
	return jobs.BenchResult{
		Op:          p.name,
		NsPerOp:     float64(elapsed.Nanoseconds()) / ops,
		AllocsPerOp: float64(allocs) / ops,
		BytesPerOp:  float64(bytes) / ops,
	}, nil
}
