package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

type stepResult struct {
	offered, inserted, completed float64
	backlog                      int64
	p50, p90, p99, max           time.Duration
	e2e50, e2e99                 time.Duration
	dropped                      int64
}

// runRate offers `rate` jobs/s for `dur` through *flagConc inserter goroutines.
func runRate(ctx context.Context, client *river.Client[pgx.Tx], cc *completionCounter, rate int, dur time.Duration) stepResult {
	ib := max(1, *flagInsertBatch)
	callsPerSec := float64(rate) / float64(ib)
	work := make(chan struct{}, 4*(*flagConc))
	var (
		inserted atomic.Int64
		dropped  atomic.Int64
		wg       sync.WaitGroup
	)
	for g := 0; g < *flagConc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if ib == 1 {
					_, err := client.Insert(ctx, NoopArgs{T: time.Now().UnixNano()}, nil)
					if err != nil {
						log.Printf("insert: %v", err)
						continue
					}
				} else {
					_, err := client.InsertMany(ctx, makeParams(ib, true))
					if err != nil {
						log.Printf("insertmany: %v", err)
						continue
					}
				}
				inserted.Add(int64(ib))
			}
		}()
	}
	rec.reset(true)
	cc.takeE2E(true)
	doneBefore := cc.done.Load()
	startedBefore := rec.started.Load()
	_ = startedBefore
	start := time.Now()
	var issued int64
	tick := time.NewTicker(time.Millisecond)
	for now := range tick.C {
		el := now.Sub(start)
		if el >= dur {
			break
		}
		want := int64(el.Seconds() * callsPerSec)
		for issued < want {
			select {
			case work <- struct{}{}:
			default:
				dropped.Add(1) // inserters saturated: offered load not achievable
			}
			issued++
		}
	}
	tick.Stop()
	close(work)
	wg.Wait()
	el := time.Since(start)
	lat := rec.take()
	rec.reset(false)
	e2e := cc.takeE2E(false)
	completed := cc.done.Load() - doneBefore
	res := stepResult{
		offered:   float64(rate),
		inserted:  float64(inserted.Load()) / el.Seconds(),
		completed: float64(completed) / el.Seconds(),
		p50:       pct(lat, 0.50), p90: pct(lat, 0.90), p99: pct(lat, 0.99), max: pct(lat, 1.0),
		e2e50: pct(e2e, 0.50), e2e99: pct(e2e, 0.99),
		dropped: dropped.Load() * int64(ib),
	}
	return res
}

func waitDrained(ctx context.Context, pool *pgxpool.Pool, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	var n int64
	for time.Now().Before(deadline) {
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state IN ('available','running')").Scan(&n)
		if n == 0 {
			return 0
		}
		time.Sleep(200 * time.Millisecond)
	}
	return n
}

func modeSteady(ctx context.Context, pool *pgxpool.Pool, rates []int) {
	type agg struct{ ins, comp, p50, p99, e2e99, backlog stats }
	aggs := map[int]*agg{}
	for rep := 0; rep < *flagReps; rep++ {
		resetTable(ctx, pool)
		client := workingClient(pool)
		ch, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 200_000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
		cc := &completionCounter{}
		go cc.run(ch)
		must(client.Start(ctx))
		time.Sleep(2 * time.Second) // leader election / producers up
		for _, rate := range rates {
			r := runRate(ctx, client, cc, rate, *flagDuration)
			var backlog int64
			_ = pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state IN ('available','running')").Scan(&backlog)
			r.backlog = backlog
			ok := r.inserted >= 0.97*r.offered && r.completed >= 0.97*r.offered && float64(backlog) < 0.5*r.offered && r.p99 < time.Second
			fmt.Printf("steady rep=%d rate=%d ib=%d: inserted %.0f/s completed %.0f/s backlog_end=%d dropped=%d | insert->start p50=%.1fms p90=%.1fms p99=%.1fms max=%.1fms | insert->completed p50=%.1fms p99=%.1fms | sustainable=%v\n",
				rep+1, rate, *flagInsertBatch, r.inserted, r.completed, backlog, r.dropped, ms(r.p50), ms(r.p90), ms(r.p99), ms(r.max), ms(r.e2e50), ms(r.e2e99), ok)
			a := aggs[rate]
			if a == nil {
				a = &agg{}
				aggs[rate] = a
			}
			a.ins.add(r.inserted)
			a.comp.add(r.completed)
			a.p50.add(ms(r.p50))
			a.p99.add(ms(r.p99))
			a.e2e99.add(ms(r.e2e99))
			a.backlog.add(float64(backlog))
			if left := waitDrained(ctx, pool, 60*time.Second); left > 0 {
				fmt.Printf("steady rep=%d rate=%d: backlog %d not drained after 60s; stopping ramp\n", rep+1, rate, left)
				break
			}
		}
		stopCtx, c2 := context.WithTimeout(ctx, 30*time.Second)
		_ = client.Stop(stopCtx)
		c2()
		cancel()
	}
	for _, rate := range rates {
		a := aggs[rate]
		if a == nil {
			continue
		}
		fmt.Printf("RESULT steady rate=%d ib=%d conc=%d workers=%d | inserted/s %s | completed/s %s | start p50 ms %s | start p99 ms %s | completed p99 ms %s | backlog_end %s\n",
			rate, *flagInsertBatch, *flagConc, *flagWorkers, a.ins.String(), a.comp.String(), a.p50.String(), a.p99.String(), a.e2e99.String(), a.backlog.String())
	}
}
