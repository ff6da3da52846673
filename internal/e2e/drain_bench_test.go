package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/stretchr/testify/require"
)

// BenchmarkDrainProcesses drains 50,000 noop jobs with one and with two
// `flint worker` processes (each with the default 25 workers per CPU),
// claiming straight from PostgreSQL or popping candidates from the Redis
// ready queue first (FLINT_READY_QUEUE). This is the measurement behind
// the default claim path:
//
//	make bench BENCH=DrainProcesses BENCHPKG=.
func BenchmarkDrainProcesses(b *testing.B) {
	bin := buildFlint(b, false)
	for _, mode := range []string{"postgres", "redis"} {
		for _, procs := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/procs=%d", mode, procs), func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					rate := drainWithProcesses(b, bin, mode, procs, 50_000)
					b.ReportMetric(rate, "jobs/s")
					b.StartTimer()
				}
			})
		}
	}
}

func drainWithProcesses(b *testing.B, bin, mode string, procs, total int) float64 {
	ctx := context.Background()
	store, dbURL := dbtest.NewStore(b)
	redisURL, prefix := dbtest.RedisPrefix(b)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var rds *db.Redis
	if mode == "redis" {
		var err error
		if rds, err = db.OpenRedis(ctx, redisURL, prefix, logger); err != nil {
			b.Fatal(err)
		}
		defer rds.Close()
		store.SetRedis(rds)
	}
	bus := db.NewEventBus(store, rds, rds != nil, logger, nil)
	store.SetEventSink(bus)
	bctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = bus.Run(bctx) }()
	enqueueNoops(b, store, total)
	stop()
	<-done
	if rds != nil {
		require.True(b, pollUntil(5*time.Minute, 20*time.Millisecond, func() bool {
			n, _ := rds.ReadyLen(ctx)
			return n >= int64(total)
		}), "the enqueue events never all reached the ready queue")
	}
	rate, _ := drainWorkers(b, bin, store, procs, total, "DATABASE_URL="+dbURL, "REDIS_URL="+redisURL,
		"FLINT_REDIS_PREFIX="+prefix, "FLINT_READY_QUEUE="+mode)
	return rate
}

// drainWorkers starts procs `flint worker` processes with env and
// returns how many jobs a second they completed until total had, and the
// CPU time (user and system) the processes used, which other load on the
// machine disturbs far less than the rate.
func drainWorkers(b *testing.B, bin string, store *db.Store, procs, total int, env ...string) (rate float64, cpu time.Duration) {
	var cmds []*exec.Cmd
	start := time.Now()
	for i := range procs {
		cmd := exec.Command(bin, "worker")
		cmd.Env = append(append(os.Environ(), env...), "FLINT_LOG_FILE=-", "LOG_LEVEL=error", fmt.Sprintf("FLINT_WORKER_ID=bench-%d", i))
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
			if c.ProcessState != nil {
				cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
			}
		}
	}()
	var n int
	if !pollUntil(5*time.Minute, 20*time.Millisecond, func() bool {
		n = completedCount(b, store, "")
		return n == total
	}) {
		b.Fatalf("%d of %d completed", n, total)
	}
	return float64(total) / time.Since(start).Seconds(), 0
}

// completedCount is how many jobs of type typ ("" for any) have
// completed, read from the counts the database keeps as jobs change
// (job_counts): a benchmark polls it while the jobs run, and counting
// the rows themselves would cost PostgreSQL a read of the whole table at
// each poll (10–40 ms at these sizes), taken from the drain it times.
func completedCount(tb testing.TB, store *db.Store, typ string) int {
	tb.Helper()
	var n int
	if err := store.Pool().QueryRow(context.Background(), `SELECT coalesce(sum(n), 0) FROM job_counts
		WHERE status = 'completed' AND NOT in_bin AND ($1 = '' OR type = $1)`, typ).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}
