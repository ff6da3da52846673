package main

import (
	"context"
	"fmt"
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
	base, _, stopAPI := startAPI(dbURL)
	var workers []*exec.Cmd
	for range *flagProcs {
		workers = append(workers, startFlint([]string{"worker"}, workerEnv(dbURL)))
	}
	stopAll := func() {
		for _, w := range workers {
			stopFlint(w)
		}
		stopAPI()
	}
	wal, c0 := walLSN(ctx, s), commits()
	start := time.Now()
	// The client's own RESULT line stays out of the table (it is the http
	// mode's row there).
	out := httpLoad(ctx, base)
	fmt.Printf("scale %s client: %s", *flagLabel, strings.TrimPrefix(string(out), "RESULT "))
	waitSucceeded(ctx, s, *flagHTTPN, "scale", stopAll)
	var last time.Time
	must(s.Pool().QueryRow(ctx, `SELECT max(finished_at) FROM jobs`).Scan(&last))
	walBytes := walSince(ctx, s, wal)
	// Backends report their commits to the statistics when they exit (a
	// busy one at most once a second): count them once Flint's are gone.
	stopAll()
	_, _ = s.Pool().Exec(ctx, "SELECT pg_stat_force_next_flush()")
	n := float64(*flagHTTPN)
	perJob := float64(commits()-c0) / n
	rate := n / last.Sub(start).Seconds()
	fmt.Printf("scale %s: api + %d workers, %d jobs enqueued and run at %.0f jobs/s | WAL bytes/job %.0f, commits/job %.2f\n",
		*flagLabel, *flagProcs, *flagHTTPN, rate, walBytes/n, perJob)
	fmt.Printf("RESULT flint scale %s rate=%.0f wal_per_job=%.0f commits_per_job=%.2f\n", *flagLabel, rate, walBytes/n, perJob)
}
