package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

func modeMigrate(ctx context.Context, pool *pgxpool.Pool) {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	must(err)
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	must(err)
	fmt.Printf("migrate: applied %d versions\n", len(res.Versions))
}

func modeInsert(ctx context.Context, pool *pgxpool.Pool) {
	client := insertOnlyClient(pool)
	batch := *flagBatch
	if batch <= 0 || batch > *flagN {
		batch = *flagN
	}
	kinds := []string{"InsertMany", "InsertManyFast"}
	if *flagUnique {
		kinds = append(kinds, "InsertMany-unique")
	}
	for _, name := range kinds {
		fast := name == "InsertManyFast"
		var st stats
		for rep := 0; rep < *flagReps; rep++ {
			resetTable(ctx, pool)
			params := makeParams(*flagN, false)
			if name == "InsertMany-unique" {
				// Each job unique by its args, the nearest River has to
				// an idempotency key per job: a unique index and ON
				// CONFLICT on insert.
				for i := range params {
					params[i].Args = NoopArgs{K: fmt.Sprintf("key-%d-%d", rep, i)}
					params[i].InsertOpts = &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
				}
			}
			start := time.Now()
			for off := 0; off < len(params); off += batch {
				end := min(off+batch, len(params))
				var err error
				if fast {
					_, err = client.InsertManyFast(ctx, params[off:end])
				} else {
					_, err = client.InsertMany(ctx, params[off:end])
				}
				must(err)
			}
			el := time.Since(start)
			rate := float64(*flagN) / el.Seconds()
			st.add(rate)
			fmt.Printf("insert rep=%d %s n=%d batch=%d: %v => %.0f jobs/s\n", rep+1, name, *flagN, batch, el.Round(time.Millisecond), rate)
		}
		fmt.Printf("RESULT insert %s n=%d batch=%d jobs/s: %s\n", name, *flagN, batch, st.String())
	}
}

func modeInsert1(ctx context.Context, pool *pgxpool.Pool) {
	client := insertOnlyClient(pool)
	var st, p50s, p99s stats
	for rep := 0; rep < *flagReps; rep++ {
		resetTable(ctx, pool)
		var (
			count atomic.Int64
			mu    sync.Mutex
			lats  []int64
			wg    sync.WaitGroup
		)
		deadline := time.Now().Add(*flagDuration)
		start := time.Now()
		for g := 0; g < *flagConc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []int64
				for time.Now().Before(deadline) {
					t := time.Now()
					_, err := client.Insert(ctx, NoopArgs{}, nil)
					must(err)
					local = append(local, int64(time.Since(t)))
					count.Add(1)
				}
				mu.Lock()
				lats = append(lats, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		el := time.Since(start)
		rate := float64(count.Load()) / el.Seconds()
		st.add(rate)
		p50s.add(ms(pct(lats, 0.5)))
		p99s.add(ms(pct(lats, 0.99)))
		fmt.Printf("insert1 rep=%d conc=%d: %d inserts in %v => %.0f inserts/s, call p50=%.2fms p99=%.2fms\n",
			rep+1, *flagConc, count.Load(), el.Round(time.Millisecond), rate, ms(pct(lats, 0.5)), ms(pct(lats, 0.99)))
	}
	fmt.Printf("RESULT insert1 conc=%d inserts/s: %s | call p50 ms: %s | call p99 ms: %s\n", *flagConc, st.String(), p50s.String(), p99s.String())
}
