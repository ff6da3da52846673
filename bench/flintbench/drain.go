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
	// Progress comes from the throughput counters the finishing statement
	// keeps (a few rows, so polling them costs the server nothing, where
	// counting jobs would compete with the drain it measures), less what
	// they held before: an earlier drain of the same database counts there.
	const doneSQL = `SELECT coalesce(sum(n), 0) FROM job_throughput WHERE outcome = 'succeeded'`
	var before int
	must(s.Pool().QueryRow(ctx, doneSQL).Scan(&before))

	env := workerEnv(dbURL)
	start := time.Now()
	cmd := startFlint([]string{*flagCmd}, env)
	deadline := start.Add(10 * time.Minute)
	for {
		time.Sleep(50 * time.Millisecond)
		var done int
		must(s.Pool().QueryRow(ctx, doneSQL).Scan(&done))
		if done -= before; done >= n {
			break
		}
		if time.Now().After(deadline) {
			stopFlint(cmd)
			log.Fatalf("drain: %d of %d jobs done after 10 minutes", done, n)
		}
	}
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
