package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/flinthq/flint/internal/domain"
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
func RunBench(ctx context.Context, cfg BenchConfig) ([]domain.BenchResult, error) {
	algs, sizes, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	var out []domain.BenchResult
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
func FormatBenchTable(results []domain.BenchResult) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\tsize\top\tns/op\tallocs/op\tB/op\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%.3f\t%.1f\t\n", r.Algorithm, r.Size, r.Op, r.NsPerOp, r.AllocsPerOp, r.BytesPerOp)
	}
	_ = tw.Flush() // into a strings.Builder, which cannot fail
	return b.String()
}
