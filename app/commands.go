package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/scheduler"
)

// healthcheck probes the flint on this machine: exit 0 when /healthz
// answers 200 within 3 s, 1 otherwise. It touches neither the database nor
// the log file, so a container health check is cheap.
func healthcheck(addr string) int {
	if addr == "" {
		addr = ":8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "healthcheck: FLINT_ADDR=%q: %v\n", addr, err)
		return 1
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get("http://" + net.JoinHostPort(host, port) + "/healthz")
	if err != nil {
		fmt.Fprintln(os.Stderr, "healthcheck:", err)
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(os.Stderr, "healthcheck: /healthz answered", resp.Status)
		return 1
	}
	return 0
}

// runBenchmark runs the scheduler benchmark for the HTTP layer, which names
// both strategies "both".
func runBenchmark(ctx context.Context, n int, algorithm string) ([]domain.BenchResult, error) {
	var algs []string // none: both
	if algorithm != "both" {
		algs = []string{algorithm}
	}
	return scheduler.RunBench(ctx, scheduler.BenchConfig{N: n, Algorithms: algs})
}

// benchCommand is `flint bench --n 10000 [--algorithm heap|timing_wheel|both]
// [--sizes 10000,100000,1000000]`: the scheduler benchmark on this machine,
// printed as a table.
func benchCommand(args []string) int {
	if len(args) > 0 && args[0] == "history" {
		return historyCommand(args[1:])
	}
	if len(args) > 0 && args[0] == "drop-day" {
		return dropDayCommand(args[1:])
	}
	fs := flag.NewFlagSet("flint bench", flag.ContinueOnError)
	n := fs.Int("n", 10000, "entries in the index")
	alg := fs.String("algorithm", "both", "heap, timing_wheel or both")
	sizes := fs.String("sizes", "", "comma-separated sizes to run instead of -n, e.g. 10000,100000,1000000")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "flint bench: unexpected argument %q; it takes only the flags -n, -algorithm and -sizes\n", fs.Arg(0))
		return 2
	}
	cfg := scheduler.BenchConfig{N: *n}
	switch *alg {
	case "both":
	case scheduler.StrategyHeap, scheduler.StrategyTimingWheel:
		cfg.Algorithms = []string{*alg}
	default:
		fmt.Fprintf(os.Stderr, "flint bench: -algorithm %q: want heap, timing_wheel or both\n", *alg)
		return 2
	}
	if *sizes != "" {
		for _, part := range strings.Split(*sizes, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(part))
			if err != nil {
				fmt.Fprintf(os.Stderr, "flint bench: -sizes: %q is not a number\n", part)
				return 2
			}
			cfg.Sizes = append(cfg.Sizes, v)
		}
	}
	results, err := scheduler.RunBench(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint bench:", err)
		return 2
	}
	fmt.Print(scheduler.FormatBenchTable(results))
	return 0
}

// historyCommand is `flint bench history --jobs N [--days 30]`: N finished
// jobs written into the database at DATABASE_URL (migrated first), for
// measuring Flint with a realistic history. It prints its rate as it goes.
func historyCommand(args []string) int {
	fs := flag.NewFlagSet("flint bench history", flag.ContinueOnError)
	n := fs.Int("jobs", 0, "finished jobs to write (required)")
	days := fs.Int("days", 30, "spread them over the last this many days")
	live := fs.Bool("live", false, "keep them in the live table instead of moving them to the history")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(os.Stderr, "flint bench history: unexpected argument %q; it takes only the flags -jobs, -days and -live\n", fs.Arg(0))
		return 2
	case *n < 1:
		fmt.Fprintln(os.Stderr, "flint bench history: -jobs: give how many finished jobs to write, e.g. -jobs 1000000")
		return 2
	case *days < 1 || *days > 3650:
		fmt.Fprintln(os.Stderr, "flint bench history: -days: must be between 1 and 3650")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, code := openBenchStore(ctx, "flint bench history")
	if store == nil {
		return code
	}
	defer store.Close()
	start := time.Now()
	err := store.SeedHistory(ctx, db.History{Jobs: *n, Days: *days, Live: *live}, func(done int) {
		el := time.Since(start)
		fmt.Printf("%d of %d finished jobs written in %s (%.0f jobs/s)\n", done, *n, el.Round(time.Millisecond), float64(done)/el.Seconds())
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint bench history:", err)
		return 1
	}
	return 0
}

// openBenchStore migrates and opens the database at DATABASE_URL for a bench
// subcommand; on failure it prints why and returns the exit code.
func openBenchStore(ctx context.Context, name string) (*db.Store, int) {
	migrateURL, dbConfig, err := commandDatabase(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return nil, 2
	}
	if err := db.Migrate(ctx, migrateURL, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return nil, 1
	}
	store, err := db.Open(ctx, dbConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return nil, 1
	}
	return store, 0
}

// dropDayCommand is `flint bench drop-day [-live]`: it removes the oldest
// day of completed jobs from the database at DATABASE_URL as retention
// does (dropping its history partition, or with -live deleting its rows
// from the live table) and prints how long that took.
func dropDayCommand(args []string) int {
	fs := flag.NewFlagSet("flint bench drop-day", flag.ContinueOnError)
	live := fs.Bool("live", false, "delete the day's rows from the live table (history written with -live)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "flint bench drop-day: unexpected argument %q; it takes only the flag -live\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	store, code := openBenchStore(ctx, "flint bench drop-day")
	if store == nil {
		return code
	}
	defer store.Close()
	start := time.Now()
	day, n, err := store.RemoveOldestDay(ctx, *live)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint bench drop-day:", err)
		return 1
	}
	how := "dropping its history partition"
	if *live {
		how = "deleting its rows from the live table"
	}
	fmt.Printf("removed %s's %d completed jobs by %s in %s\n", day.Format("2006-01-02"), n, how, time.Since(start).Round(time.Microsecond))
	return 0
}

// metricsMux serves /metrics on the separate metrics listener.
func metricsMux(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	return mux
}
