package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"sync"
	"time"
)

// modeSingle measures single enqueues over HTTP, one job a request, as a
// web service makes them: -conc connections, each sending its next request
// when the last is answered.
func modeSingle(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	base, client, stop := startAPI(dbURL)
	defer stop()
	body := []byte(`{"type":"noop","payload":{"n":1}}`)
	post := func() time.Duration {
		t := time.Now()
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewReader(body))
		must(err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", benchKey)
		resp, err := client.Do(req)
		must(err)
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			log.Fatalf("single: %s: %.300s", resp.Status, out)
		}
		return time.Since(t)
	}
	// Warm up every connection and the statement caches; not timed.
	var wg sync.WaitGroup
	for range *flagConc {
		wg.Go(func() {
			for range 20 {
				post()
			}
		})
	}
	wg.Wait()
	var mu sync.Mutex
	var lats []time.Duration
	deadline := time.Now().Add(*flagDuration)
	start := time.Now()
	for range *flagConc {
		wg.Go(func() {
			var local []time.Duration
			for time.Now().Before(deadline) {
				local = append(local, post())
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
	s := openStore(ctx, dbURL)
	defer s.Close()
	var total int
	must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&total))
	if want := len(lats) + 20**flagConc; total != want {
		log.Fatalf("single: %d jobs stored, %d answered 201", total, want)
	}
	fmt.Printf("single %s conc=%d: %d requests in %v => %.0f jobs/s, p50=%.2fms p99=%.2fms\n",
		*flagLabel, *flagConc, len(lats), el.Round(time.Millisecond), rate, pct(0.5), pct(0.99))
	fmt.Printf("RESULT flint single %s rate=%.0f p50_ms=%.2f p99_ms=%.2f\n", *flagLabel, rate, pct(0.5), pct(0.99))
}
