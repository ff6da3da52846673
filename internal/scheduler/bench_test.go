package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkIndex measures every strategy on every operation at 10k, 100k
// and 1M entries (1M skipped with -short), on RunBench's workload (see
// RunBench for what each operation does). One benchmark op is one index
// operation; when a phase's operations are used up, its starting index is
// rebuilt with the timer stopped and the phase starts again.
func BenchmarkIndex(b *testing.B) {
	sizes := []int{10_000, 100_000, 1_000_000}
	for _, strategy := range Strategies() {
		b.Run(strategy, func(b *testing.B) {
			for k, op := range benchOps() {
				b.Run(op, func(b *testing.B) {
					for _, size := range sizes {
						b.Run(fmt.Sprintf("n=%d", size), func(b *testing.B) {
							if size > 100_000 && testing.Short() {
								b.Skip("1M entries skipped with -short")
							}
							// Generated afresh (same seed) rather than kept for
							// the next benchmark: a million-entry workload held
							// in memory would slow every collection after it.
							wl, err := newWorkload(size, 1)
							require.NoError(b, err)
							p := wl.phases(strategy)[k]
							// Collect the setup's garbage while the timer is
							// off, so that no collection it started runs on
							// into the measured operations (as RunBench does).
							ix := p.setup()
							runtime.GC()
							i := 0
							b.ReportAllocs()
							for b.Loop() {
								if i == p.ops {
									b.StopTimer()
									ix = p.setup()
									runtime.GC()
									i = 0
									b.StartTimer()
								}
								p.step(ix, i)
								i++
							}
						})
					}
				})
			}
		})
	}
}

// benchOps lists the operations in the order RunBench reports them.
func benchOps() []string {
	return []string{BenchInsert, BenchPop, BenchRescore, BenchCancel, BenchMixed}
}

func TestRunBench(t *testing.T) {
	t.Parallel()
	res, err := RunBench(context.Background(), BenchConfig{N: 2000, Seed: 7})
	require.NoError(t, err)
	require.Len(t, res, 2*len(benchOps()))
	wl, err := newWorkload(2000, 7)
	require.NoError(t, err)
	for k, strategy := range Strategies() {
		phases := wl.phases(strategy)
		for j, op := range benchOps() {
			r := res[k*len(benchOps())+j]
			require.Equal(t, strategy, r.Algorithm)
			require.Equal(t, 2000, r.Size)
			require.Equal(t, op, r.Op)
			require.Positive(t, r.NsPerOp, "%s %s", strategy, op)
			require.GreaterOrEqual(t, r.AllocsPerOp, 0.0)
			require.GreaterOrEqual(t, r.BytesPerOp, 0.0)
			want := 2000
			if op == BenchCancel {
				want = 1000
			}
			require.Equal(t, op, phases[j].name)
			require.Equal(t, want, phases[j].ops, "%s %s", strategy, op)
		}
	}

	table := FormatBenchTable(res)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	require.Len(t, lines, 1+2*len(benchOps()))
	for _, col := range []string{"algorithm", "size", "op", "ns/op", "allocs/op", "B/op"} {
		require.Contains(t, lines[0], col)
	}
	require.Contains(t, table, "timing_wheel")
	require.Contains(t, table, "rescore")
}

func TestRunBenchSizesAndOneAlgorithm(t *testing.T) {
	t.Parallel()
	res, err := RunBench(context.Background(), BenchConfig{N: 1, Sizes: []int{1, 300}, Algorithms: []string{StrategyTimingWheel, StrategyTimingWheel}})
	require.NoError(t, err)
	require.Len(t, res, 2*len(benchOps()), "a repeated algorithm runs once per size")
	for i, r := range res {
		require.Equal(t, StrategyTimingWheel, r.Algorithm)
		require.Equal(t, []int{1, 300}[i/len(benchOps())], r.Size)
		require.Equal(t, benchOps()[i%len(benchOps())], r.Op)
	}
}

func TestRunBenchRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  BenchConfig
		want string
	}{
		{"zero n", BenchConfig{N: 0}, "n must be between 1 and 2000000"},
		{"negative n", BenchConfig{N: -5}, "n must be between"},
		{"n too large", BenchConfig{N: MaxBenchN + 1}, "n must be between"},
		{"unknown algorithm", BenchConfig{N: 10, Algorithms: []string{"heap", "fifo"}}, `unknown algorithm "fifo"`},
		{"size too small", BenchConfig{N: 10, Sizes: []int{10, 0}}, "size must be between"},
		{"size too large", BenchConfig{N: 10, Sizes: []int{3_000_000}}, "size must be between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := RunBench(context.Background(), tt.cfg)
			require.ErrorContains(t, err, tt.want)
			require.Nil(t, res)
		})
	}
}

func TestRunBenchHonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := RunBench(ctx, BenchConfig{N: 1000})
	require.ErrorIs(t, err, context.Canceled)
}
