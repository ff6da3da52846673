package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// modeClaim measures a bare SKIP LOCKED queue: no River, no notifications, just
// claim (UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n))
// and complete (UPDATE ... WHERE id = ANY($1)), each in its own autocommit tx.
func modeClaim(ctx context.Context, pool *pgxpool.Pool) {
	ddl := []string{
		`DROP TABLE IF EXISTS rawq`,
		`CREATE TABLE rawq (
			id bigserial PRIMARY KEY,
			state smallint NOT NULL DEFAULT 0, -- 0 available, 1 running, 2 completed
			queue text NOT NULL DEFAULT 'default',
			priority smallint NOT NULL DEFAULT 1,
			args jsonb NOT NULL DEFAULT '{}',
			attempt int NOT NULL DEFAULT 0,
			scheduled_at timestamptz NOT NULL DEFAULT now(),
			attempted_at timestamptz,
			finalized_at timestamptz)`,
		`CREATE INDEX rawq_fetch ON rawq (queue, priority, scheduled_at, id) WHERE state = 0`,
	}
	for _, q := range ddl {
		_, err := pool.Exec(ctx, q)
		must(err)
	}
	claimSQL := `UPDATE rawq SET state = 1, attempt = attempt + 1, attempted_at = now()
		WHERE id IN (SELECT id FROM rawq WHERE state = 0 AND queue = 'default' AND scheduled_at <= now()
		             ORDER BY priority, scheduled_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
		RETURNING id`
	completeSQL := `UPDATE rawq SET state = 2, finalized_at = now() WHERE id = ANY($1)`
	for _, b := range parseInts(*flagClaimBatches) {
		var st stats
		for rep := 0; rep < *flagReps; rep++ {
			_, err := pool.Exec(ctx, "TRUNCATE rawq")
			must(err)
			_, err = pool.Exec(ctx, "INSERT INTO rawq (args) SELECT '{}'::jsonb FROM generate_series(1, $1)", *flagN)
			must(err)
			_, err = pool.Exec(ctx, "VACUUM ANALYZE rawq")
			must(err)
			_, _ = pool.Exec(ctx, "CHECKPOINT")
			var done atomic.Int64
			var wg sync.WaitGroup
			walStart := walLSN(ctx, pool)
			start := time.Now()
			for g := 0; g < *flagClaimConc; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						rows, err := pool.Query(ctx, claimSQL, b)
						must(err)
						ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
						must(err)
						if len(ids) == 0 {
							return
						}
						_, err = pool.Exec(ctx, completeSQL, ids)
						must(err)
						done.Add(int64(len(ids)))
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			rate := float64(done.Load()) / el.Seconds()
			st.add(rate)
			fmt.Printf("claim rep=%d batch=%d conc=%d: %d jobs in %v => %.0f jobs/s | WAL bytes/job %.0f\n", rep+1, b, *flagClaimConc, done.Load(), el.Round(time.Millisecond), rate, walDiff(ctx, pool, walStart)/float64(done.Load()))
		}
		fmt.Printf("RESULT claim batch=%d conc=%d n=%d jobs/s: %s\n", b, *flagClaimConc, *flagN, st.String())
	}
}
