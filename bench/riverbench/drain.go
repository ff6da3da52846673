package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// completionCounter subscribes to completed events and counts them, and records
// insert->completed latency for timed jobs.
type completionCounter struct {
	done     atomic.Int64
	lastNano atomic.Int64
	mu       sync.Mutex
	e2e      []int64
	on       bool
}

func (cc *completionCounter) run(ch <-chan *river.Event) {
	for ev := range ch {
		if ev == nil {
			return
		}
		now := time.Now().UnixNano()
		cc.done.Add(1)
		cc.lastNano.Store(now)
		var a NoopArgs
		if ev.Job != nil && len(ev.Job.EncodedArgs) > 0 {
			_ = json.Unmarshal(ev.Job.EncodedArgs, &a)
		}
		if a.T != 0 {
			cc.mu.Lock()
			if cc.on {
				cc.e2e = append(cc.e2e, now-a.T)
			}
			cc.mu.Unlock()
		}
	}
}

func (cc *completionCounter) takeE2E(on bool) []int64 {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	out := cc.e2e
	cc.e2e = nil
	cc.on = on
	return out
}

func modeDrain(ctx context.Context, pool *pgxpool.Pool) {
	ins := insertOnlyClient(pool)
	// tag names the settings a drain ran with beyond its workers, so that
	// several drains in one output stay apart.
	tag := ""
	if *flagFetchCooldown > 0 {
		tag += " cooldown=" + flagFetchCooldown.String()
	}
	if *flagCold {
		tag += " cold"
	}
	var st stats
	for rep := 0; rep < *flagReps; rep++ {
		resetTable(ctx, pool)
		params := makeParams(*flagN, false)
		walIns := walLSN(ctx, pool)
		for off := 0; off < len(params); off += *flagDrainBatch {
			_, err := ins.InsertManyFast(ctx, params[off:min(off+*flagDrainBatch, len(params))])
			must(err)
		}
		insWAL := walDiff(ctx, pool, walIns)
		if !*flagCold {
			_, _ = pool.Exec(ctx, "ANALYZE river_job")
		}
		walWork := walLSN(ctx, pool)

		client := workingClient(pool)
		ch, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: *flagN + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
		cc := &completionCounter{}
		go cc.run(ch)
		start := time.Now()
		must(client.Start(ctx))
		timeout := time.After(10 * time.Minute)
		tick := time.NewTicker(5 * time.Millisecond)
	loop:
		for {
			select {
			case <-tick.C:
				if cc.done.Load() >= int64(*flagN) {
					break loop
				}
			case <-timeout:
				log.Printf("drain timeout: %d/%d done", cc.done.Load(), *flagN)
				break loop
			}
		}
		tick.Stop()
		el := time.Duration(cc.lastNano.Load() - start.UnixNano())
		rate := float64(cc.done.Load()) / el.Seconds()
		st.add(rate)
		workWAL := walDiff(ctx, pool, walWork)
		fmt.Printf("drain rep=%d n=%d workers=%d%s: %v => %.0f jobs/s | WAL bytes/job: insert %.0f, fetch+complete %.0f\n", rep+1, *flagN, *flagWorkers, tag, el.Round(time.Millisecond), rate, insWAL/float64(*flagN), workWAL/float64(*flagN))
		stopCtx, c2 := context.WithTimeout(ctx, 30*time.Second)
		_ = client.Stop(stopCtx)
		c2()
		cancel()
	}
	fmt.Printf("RESULT drain n=%d workers=%d%s jobs/s: %s\n", *flagN, *flagWorkers, tag, st.String())
}
