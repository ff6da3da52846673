package main

import (
	"context"
	"fmt"
	"log"
	"math/rand"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func modeIdle(ctx context.Context, pool *pgxpool.Pool) {
	var p50s, p99s, mins stats
	for rep := 0; rep < *flagReps; rep++ {
		resetTable(ctx, pool)
		rec.notify = make(chan int64, 16)
		client := workingClient(pool)
		must(client.Start(ctx))
		time.Sleep(3 * time.Second)
		var lats []int64
		var callLat []int64
		for i := 0; i < *flagSamples; i++ {
			time.Sleep(time.Duration(200+rand.Intn(300)) * time.Millisecond) // let the client go idle
			t := time.Now()
			_, err := client.Insert(ctx, NoopArgs{T: t.UnixNano()}, nil)
			must(err)
			callLat = append(callLat, int64(time.Since(t)))
			select {
			case d := <-rec.notify:
				lats = append(lats, d)
			case <-time.After(10 * time.Second):
				log.Printf("idle: job not started within 10s")
			}
		}
		stopCtx, c2 := context.WithTimeout(ctx, 30*time.Second)
		_ = client.Stop(stopCtx)
		c2()
		rec.notify = nil
		p50s.add(ms(pct(lats, 0.5)))
		p99s.add(ms(pct(lats, 0.99)))
		mins.add(ms(pct(lats, 0)))
		fmt.Printf("idle rep=%d samples=%d: insert->start min=%.2fms p50=%.2fms p90=%.2fms p99=%.2fms max=%.2fms | Insert call p50=%.2fms\n",
			rep+1, len(lats), ms(pct(lats, 0)), ms(pct(lats, 0.5)), ms(pct(lats, 0.9)), ms(pct(lats, 0.99)), ms(pct(lats, 1)), ms(pct(callLat, 0.5)))
	}
	fmt.Printf("RESULT idle insert->start p50 ms: %s | p99 ms: %s | min ms: %s\n", p50s.String(), p99s.String(), mins.String())
}
