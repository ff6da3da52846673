package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkExampleTypeDrain: a job type of one's own, in a program built
// over the app package (examples/invoices), drains as fast as the
// built-in noop does in the stock binary. Each round pre-inserts 20,000
// jobs into a fresh database and times one `worker` process (default
// settings, no race detector) from start until every job has completed,
// for three drains in turn on the same PostgreSQL:
//
//   - noop in the stock binary,
//   - invoice.seen in the example: a typed payload decoded strictly and
//     validated, and nothing else to do, so its ratio to noop
//     (seen-ratio) is what being a type of one's own costs,
//   - invoice.total in the example, which also adds up its lines,
//     reports progress per line, writes a log line and returns a result
//     (total-ratio: the cost of that work; ARCHITECTURE, "What a type of
//     one's own costs in a drain"),
//
// in that order in odd rounds and the reverse in even ones, so that no
// drain always follows the same one. Run it with
// make bench BENCH=ExampleTypeDrain BENCHPKG=./internal/e2e.
func BenchmarkExampleTypeDrain(b *testing.B) {
	const total = 20_000
	stock, example := buildFlint(b, false), buildExample(b, false)
	drains := []struct {
		bin  string
		p    jobs.EnqueueParams
		rate float64
	}{
		{bin: stock, p: jobs.EnqueueParams{Type: jobs.TypeNoop}},
		{bin: example, p: jobs.EnqueueParams{Type: "invoice.seen", Payload: json.RawMessage(`{"invoice": "INV-1042"}`)}},
		{bin: example, p: jobs.EnqueueParams{Type: "invoice.total", Payload: json.RawMessage(invoicePayload)}},
	}
	round := 0
	for b.Loop() {
		for i := range drains {
			d := &drains[i]
			if round%2 == 1 {
				d = &drains[len(drains)-1-i]
			}
			d.rate += drainWith(b, d.bin, d.p, total)
		}
		round++
	}
	noop, seen, invoice := drains[0].rate, drains[1].rate, drains[2].rate
	b.ReportMetric(noop/float64(b.N), "noop-jobs/s")
	b.ReportMetric(seen/float64(b.N), "seen-jobs/s")
	b.ReportMetric(invoice/float64(b.N), "invoice-jobs/s")
	b.ReportMetric(seen/noop, "seen-ratio")
	b.ReportMetric(invoice/noop, "total-ratio")
}

// drainWith pre-inserts total copies of p into a fresh database, then
// starts `bin worker` and returns the rate at which it completes them all.
func drainWith(b *testing.B, bin string, p jobs.EnqueueParams, total int) float64 {
	b.Helper()
	b.StopTimer() // the setup is not timed; the drain is
	defer b.StartTimer()
	store, url := dbtest.NewStore(b)
	defer store.Close() // each round's pool goes with it, not at the end of the benchmark
	ctx := context.Background()
	batch := make([]jobs.EnqueueParams, 5000)
	for i := range batch {
		batch[i] = p
	}
	for range total / len(batch) {
		_, err := store.Enqueue(ctx, batch...)
		require.NoError(b, err)
	}
	b.StartTimer()
	start := time.Now()
	w := startBinary(b, bin, "worker", url,
		"FLINT_WORKERS=", "LOG_LEVEL=warn", "FLINT_LEASE_TTL=", "FLINT_HEARTBEAT_INTERVAL=",
		"FLINT_POLL_INTERVAL=", "FLINT_REAP_INTERVAL=", "FLINT_PROMOTE_INTERVAL=")
	for {
		left, err := remaining(ctx, store)
		require.NoError(b, err)
		if left == 0 {
			break
		}
		select {
		case <-w.done:
			b.Fatalf("worker exited with %d jobs left: %v\n%s", left, w.err, w.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	require.NoError(b, w.cmd.Process.Kill())
	<-w.done
	return float64(total) / elapsed.Seconds()
}

// remaining counts the jobs not yet completed.
func remaining(ctx context.Context, store *db.Store) (int, error) {
	var n int
	err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status <> 'completed'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	return n, nil
}
