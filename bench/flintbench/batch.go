package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// modeBatch: fresh database, `flint api`, and n jobs sent in requests of
// -batch from -conc connections. Bodies are built before the clock starts.
func modeBatch(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	key := benchKey
	base, client, stop := startAPI(dbURL)
	defer stop()
	var bodies [][]byte
	run := time.Now().UnixNano()
	for off := 0; off < *flagN; off += *flagBatch {
		var b bytes.Buffer
		b.WriteString(`{"jobs":[`)
		for i := off; i < min(off+*flagBatch, *flagN); i++ {
			if i > off {
				b.WriteByte(',')
			}
			if *flagKeys {
				fmt.Fprintf(&b, `{"type":"noop","idempotency_key":"bench-%d-%d"}`, run, i)
			} else {
				b.WriteString(`{"type":"noop"}`)
			}
		}
		b.WriteString(`]}`)
		bodies = append(bodies, b.Bytes())
	}
	post := func(body []byte) {
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/jobs/batch", bytes.NewReader(body))
		must(err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", key)
		resp, err := client.Do(req)
		must(err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			log.Fatalf("batch: %s: %.300s", resp.Status, out)
		}
	}
	// Warm up as a running API is warm: one request on each of the -conc
	// connections, so that the API has its database connections and
	// statement caches before the clock starts. Not timed.
	warm := min(*flagConc, len(bodies)-1)
	var wwg sync.WaitGroup
	for _, body := range bodies[:warm] {
		wwg.Go(func() { post(body) })
	}
	wwg.Wait()
	bodies = bodies[warm:]
	n := *flagN - warm*(*flagBatch)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range *flagConc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				post(bodies[i])
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	rate := float64(n) / el.Seconds()
	if *flagKeys {
		// The same requests again: every job must come back as the existing one.
		s := openStore(ctx, dbURL)
		defer s.Close()
		post(bodies[0])
		var total int
		must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&total))
		if total != *flagN {
			log.Fatalf("batch: %d jobs after resending keyed batch, want %d", total, *flagN)
		}
	}
	fmt.Printf("batch %s n=%d batch=%d conc=%d keys=%v: %v => %.0f jobs/s\n", *flagLabel, n, *flagBatch, *flagConc, *flagKeys, el.Round(time.Millisecond), rate)
	fmt.Printf("RESULT flint batch %s rate=%.0f\n", *flagLabel, rate)
}
