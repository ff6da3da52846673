// Command asynqbench measures Asynq (hibiken/asynq, Go on Redis) the way
// bench/riverbench measures River, so that scripts/bench-compare.sh can set
// its figures beside Flint's. It is a module of its own, so Asynq never
// enters Flint's dependencies.
//
// Modes (asynqbench -mode=MODE [flags]):
//
//	single   Client.Enqueue of one noop task at a time from -conc goroutines
//	         for -duration; enqueues/s and per-call p50/p99
//	drain    enqueue -n noop tasks, then start a server with -workers
//	         (Asynq's Concurrency) and time it until every task has run
//
// Asynq keeps its tasks in Redis, so it is measured on -redis (its own
// database number: the keys asynqbench leaves are deleted at the start
// and end of each run, by SCAN, never by FLUSHDB).
//
// Each mode prints one RESULT line, which flintbench -mode=table reads.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

var (
	flagMode     = flag.String("mode", "", "single|drain")
	flagRedis    = flag.String("redis", "redis://127.0.0.1:6379/9", "Redis URL for Asynq (a database number of its own)")
	flagConc     = flag.Int("conc", 64, "single: enqueuing goroutines")
	flagDuration = flag.Duration("duration", 15*time.Second, "single: how long to enqueue")
	flagN        = flag.Int("n", 100_000, "drain: tasks")
	flagWorkers  = flag.Int("workers", 1000, "drain: the server's Concurrency")
)

func main() {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("asynqbench: ")
	opt, err := asynq.ParseRedisURI(*flagRedis)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	ru, err := redis.ParseURL(*flagRedis)
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(ru)
	defer rdb.Close()
	clean(ctx, rdb)
	defer clean(ctx, rdb)
	switch *flagMode {
	case "single":
		single(ctx, opt)
	case "drain":
		drain(ctx, opt)
	default:
		log.Fatalf("unknown -mode %q", *flagMode)
	}
}

// clean deletes Asynq's keys from its database.
func clean(ctx context.Context, rdb *redis.Client) {
	iter := rdb.Scan(ctx, 0, "asynq:*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
	if err := iter.Err(); err != nil {
		log.Fatal(err)
	}
}

func single(ctx context.Context, opt asynq.RedisConnOpt) {
	client := asynq.NewClient(opt)
	defer client.Close()
	task := asynq.NewTask("noop", []byte(`{"n":1}`))
	for range 100 { // warm up the connections; not timed
		if _, err := client.EnqueueContext(ctx, task); err != nil {
			log.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	deadline := time.Now().Add(*flagDuration)
	start := time.Now()
	for range *flagConc {
		wg.Go(func() {
			var local []time.Duration
			for time.Now().Before(deadline) {
				t := time.Now()
				if _, err := client.EnqueueContext(ctx, task); err != nil {
					log.Fatal(err)
				}
				local = append(local, time.Since(t))
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	slices.Sort(lats)
	pct := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))]) / 1e6 }
	rate := float64(len(lats)) / el.Seconds()
	fmt.Printf("asynq single conc=%d: %d enqueues in %v => %.0f/s, call p50=%.2fms p99=%.2fms\n",
		*flagConc, len(lats), el.Round(time.Millisecond), rate, pct(0.5), pct(0.99))
	fmt.Printf("RESULT asynq single rate=%.0f p50_ms=%.2f p99_ms=%.2f\n", rate, pct(0.5), pct(0.99))
}

func drain(ctx context.Context, opt asynq.RedisConnOpt) {
	client := asynq.NewClient(opt)
	defer client.Close()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= int64(*flagN) {
				if _, err := client.EnqueueContext(ctx, asynq.NewTask("noop", nil)); err != nil {
					log.Fatal(err)
				}
			}
		})
	}
	wg.Wait()
	var done atomic.Int64
	finished := make(chan struct{})
	mux := asynq.NewServeMux()
	mux.HandleFunc("noop", func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(*flagN) {
			close(finished)
		}
		return nil
	})
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: *flagWorkers, LogLevel: asynq.WarnLevel})
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		log.Fatalf("drain: %d of %d tasks ran in 10 minutes", done.Load(), *flagN)
	}
	el := time.Since(start)
	srv.Shutdown()
	rate := float64(*flagN) / el.Seconds()
	fmt.Printf("asynq drain n=%d workers=%d: %v => %.0f tasks/s\n", *flagN, *flagWorkers, el.Round(time.Millisecond), rate)
	fmt.Printf("RESULT asynq drain workers=%d rate=%.0f\n", *flagWorkers, rate)
}
