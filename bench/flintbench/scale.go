package main

import (
	"context"
	"fmt"
	"log"
	"os/exec"
	"strings"
	"time"
)

// modeScale runs Flint as separate processes against one database: one
// `flint api` taking single enqueues from the outside load generator
// (-httpload, -http-n requests from -conc connections) while -procs
// `flint worker` processes run them. It prints the enqueue rate the
// client saw, the rate at which jobs completed from the first request to
// the last finish, and what the database primary wrote per job: WAL bytes
// and commits, the figures that decide when one primary is the limit.
func modeScale(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	commits := func() int64 {
		var n int64
		must(s.Pool().QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
		return n
	}
	base, _, stop := startAPI(dbURL)
	defer stop()
	var workers []*exec.Cmd
	for range *flagProcs {
		workers = append(workers, startFlint([]string{"worker"}, workerEnv(dbURL)))
	}
	defer func() {
		for _, w := range workers {
			stopFlint(w)
		}
	}()
	// Statistics are not reset per database: the figures are differences.
	_, _ = s.Pool().Exec(ctx, "SELECT pg_stat_force_next_flush()")
	wal, c0 := walLSN(ctx, s), commits()
	start := time.Now()
	// The client's own RESULT line stays out of the table (it is the http
	// mode's row there).
	out := httpLoad(ctx, base)
	fmt.Printf("scale %s client: %s", *flagLabel, strings.TrimPrefix(string(out), "RESULT "))
	const doneSQL = `SELECT coalesce(sum(n), 0) FROM job_throughput WHERE outcome = 'succeeded'`
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var done int
		must(s.Pool().QueryRow(ctx, doneSQL).Scan(&done))
		if done >= *flagHTTPN {
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("scale: %d of %d jobs done after 10 minutes", done, *flagHTTPN)
		}
	}
	var last time.Time
	must(s.Pool().QueryRow(ctx, `SELECT max(finished_at) FROM jobs`).Scan(&last))
	walBytes := walSince(ctx, s, wal)
	_, _ = s.Pool().Exec(ctx, "SELECT pg_stat_force_next_flush()")
	n := float64(*flagHTTPN)
	perJob := float64(commits()-c0) / n
	rate := n / last.Sub(start).Seconds()
	fmt.Printf("scale %s: api + %d workers, %d jobs enqueued and run at %.0f jobs/s | WAL bytes/job %.0f, commits/job %.2f\n",
		*flagLabel, *flagProcs, *flagHTTPN, rate, walBytes/n, perJob)
	fmt.Printf("RESULT flint scale %s rate=%.0f wal_per_job=%.0f commits_per_job=%.2f\n", *flagLabel, rate, walBytes/n, perJob)
}
