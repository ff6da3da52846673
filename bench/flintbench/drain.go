package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// modeDrain: fresh database, n noop jobs inserted, then the flint process
// is started and timed until the last job completes (its finished_at, read
// from the database clock, which is this machine's clock).
func modeDrain(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	el, walBytes := drain(ctx, s, dbURL, *flagN)
	rate := float64(*flagN) / el.Seconds()
	fmt.Printf("drain %s n=%d: %v => %.0f jobs/s | WAL bytes/job %.0f\n", *flagLabel, *flagN, el.Round(time.Millisecond), rate, walBytes/float64(*flagN))
	fmt.Printf("RESULT flint drain %s rate=%.0f wal_per_job=%.0f\n", *flagLabel, rate, walBytes/float64(*flagN))
}

// drain inserts n jobs into the database of s (at dbURL), starts the
// flint process of -cmd and waits until they have completed; it returns
// how long that took, to the last job's finished_at, and the WAL written
// meanwhile.
func drain(ctx context.Context, s *db.Store, dbURL string, n int) (time.Duration, float64) {
	// As riverbench: checkpoint, insert, analyze, then time the drain.
	_, _ = s.Pool().Exec(ctx, "CHECKPOINT")
	// The drained jobs are those with ids from here on (UUIDv7, by creation
	// time): with -db the database may already hold millions of jobs, and
	// reading the drained ones by id range never scans them.
	firstID := uuidV7Floor(time.Now().Add(-time.Second))
	enqueueDrained(ctx, s, n)
	if !*flagCold {
		_, err := s.Pool().Exec(ctx, "ANALYZE jobs")
		must(err)
	}
	if *flagLimits {
		// Limits far above what the drain reaches: every claim takes the
		// flow-controlled path (lock, count, bucket, key rotation) and
		// none of them holds a job back.
		_, err := s.UpdateQueue(ctx, jobs.DefaultQueue, "flintbench", func(q domain.QueueSettings) domain.QueueSettings {
			many := domain.MaxQueueConcurrency
			q.Concurrency, q.PerKeyConcurrency = &many, &many
			q.RateLimit = &domain.RateLimit{Limit: domain.MaxRateLimit, PeriodSeconds: 1}
			return q
		})
		must(err)
	}
	wal := walLSN(ctx, s)
	// An earlier drain of the same database counts in the throughput
	// counters too.
	before := succeeded(ctx, s)
	env := workerEnv(dbURL)
	start := time.Now()
	cmd := startFlint([]string{*flagCmd}, env)
	waitSucceeded(ctx, s, before+n, "drain", func() { stopFlint(cmd) })
	var last time.Time
	var completed, runs int
	must(s.Pool().QueryRow(ctx, `SELECT max(finished_at), count(*) FILTER (WHERE status = 'completed') FROM jobs
		WHERE id >= $1`, firstID).Scan(&last, &completed))
	walBytes := walSince(ctx, s, wal)
	stopFlint(cmd)
	must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM job_executions WHERE job_id >= $1`, firstID).Scan(&runs))
	if completed != n || runs != n {
		log.Fatalf("drain: %d completed and %d executions recorded for %d jobs", completed, runs, n)
	}
	return last.Sub(start), walBytes
}

// succeeded is how many jobs of s's database have succeeded, from the
// throughput counters the finishing statement keeps: a few rows, so
// polling them costs the server nothing, where counting jobs would
// compete with the work being measured.
func succeeded(ctx context.Context, s *db.Store) int {
	var n int
	must(s.Pool().QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM job_throughput WHERE outcome = 'succeeded'`).Scan(&n))
	return n
}

// waitSucceeded waits until want jobs have succeeded; after 10 minutes it
// calls stop and gives up, naming the mode.
func waitSucceeded(ctx context.Context, s *db.Store, want int, mode string, stop func()) {
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		done := succeeded(ctx, s)
		if done >= want {
			return
		}
		if time.Now().After(deadline) {
			stop()
			log.Fatalf("%s: %d of %d jobs done after 10 minutes", mode, done, want)
		}
	}
}
