package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

func newPool(ctx context.Context) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(*flagDB)
	must(err)
	cfg.MaxConns = int32(*flagPool)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	must(err)
	must(pool.Ping(ctx))
	return pool
}

func logger() *slog.Logger {
	lvl := slog.LevelWarn
	if *flagVerbose {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// insertOnlyClient has no queues: it can insert but never works.
func insertOnlyClient(pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: logger()})
	must(err)
	return c
}

func workingClient(pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	workers := river.NewWorkers()
	river.AddWorker(workers, &NoopWorker{})
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:            logger(),
		FetchCooldown:     *flagFetchCooldown,
		FetchPollInterval: *flagFetchPoll,
		PollOnly:          *flagPollOnly,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *flagWorkers}},
		Workers:           workers,
	})
	must(err)
	return c
}

func resetTable(ctx context.Context, pool *pgxpool.Pool) {
	_, err := pool.Exec(ctx, "TRUNCATE river_job")
	must(err)
	if !*flagCold {
		_, err = pool.Exec(ctx, "VACUUM ANALYZE river_job")
		must(err)
	}
	_, _ = pool.Exec(ctx, "CHECKPOINT")
}

// walLSN returns the current WAL insert position (for WAL bytes per job).
func walLSN(ctx context.Context, pool *pgxpool.Pool) string {
	var lsn string
	_ = pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn)
	return lsn
}

func walDiff(ctx context.Context, pool *pgxpool.Pool, from string) float64 {
	var d float64
	_ = pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8", from).Scan(&d)
	return d
}

func settingsLine(ctx context.Context, pool *pgxpool.Pool) string {
	var sc, fs, sb string
	_ = pool.QueryRow(ctx, "SELECT current_setting('synchronous_commit'), current_setting('fsync'), current_setting('shared_buffers')").Scan(&sc, &fs, &sb)
	return fmt.Sprintf("pg synchronous_commit=%s fsync=%s shared_buffers=%s | pool=%d workers=%d fetch_cooldown=%v fetch_poll=%v poll_only=%v",
		sc, fs, sb, *flagPool, *flagWorkers, cmpDur(*flagFetchCooldown, river.FetchCooldownDefault), cmpDur(*flagFetchPoll, river.FetchPollIntervalDefault), *flagPollOnly)
}

func cmpDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

func makeParams(n int, timed bool) []river.InsertManyParams {
	p := make([]river.InsertManyParams, n)
	for i := range p {
		a := NoopArgs{}
		if timed {
			a.T = time.Now().UnixNano()
		}
		p[i] = river.InsertManyParams{Args: a}
	}
	return p
}
