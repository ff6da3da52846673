package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitsSQL lists what each active backend of the matching databases is
// doing: its wait event, or CPU when it waits on nothing.
const waitsSQL = `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity
WHERE state = 'active' AND pid <> pg_backend_pid() AND datname ~ $1 AND backend_type = 'client backend'`

// modeWaits samples pg_stat_activity and prints, for each wait event, the
// share of backend samples spent in it and the mean number of backends in
// it at a time.
func modeWaits(ctx context.Context) {
	conn, err := adminConn(ctx)
	must(err)
	defer conn.Close(ctx)
	ctx, cancel := context.WithTimeout(ctx, *flagDuration)
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	counts := map[string]int{}
	samples, total := 0, 0
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-sig:
			break loop
		case <-t.C:
		}
		rows, err := conn.Query(ctx, waitsSQL, *flagMatch)
		if err != nil {
			break
		}
		evs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			break
		}
		samples++
		for _, e := range evs {
			counts[e]++
			total++
		}
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return counts[b] - counts[a] })
	var parts []string
	for _, k := range keys {
		if len(parts) == 8 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%% (%.1f)", k, 100*float64(counts[k])/float64(max(total, 1)), float64(counts[k])/float64(max(samples, 1))))
	}
	fmt.Printf("WAITS %s: %d samples, %.1f active backends on average: %s\n", *flagLabel, samples,
		float64(total)/float64(max(samples, 1)), strings.Join(parts, ", "))
}
