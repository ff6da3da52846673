package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/jobs"
)

// modeSustain feeds one `flint worker` -rate noop jobs a second for
// -duration (from a fresh database, or -db), with a `flint scheduler`
// moving finished jobs to the history -history-after minutes after they
// finish, holds a REPEATABLE READ
// transaction open from -hold-from for -hold, and samples the jobs table's
// row counts every -sample. Dead rows can only be removed once no snapshot
// needs them, so they pile up while the transaction is open; the figure
// of interest is whether they stay bounded outside it and come back down
// after it. Autovacuum must be on in the server (it says so if not).
func modeSustain(ctx context.Context) {
	dbURL, drop := freshDatabase(ctx)
	defer drop()
	s := openStore(ctx, dbURL)
	defer s.Close()
	var av string
	must(s.Pool().QueryRow(ctx, `SHOW autovacuum`).Scan(&av))
	if av != "on" {
		log.Printf("warning: autovacuum is %s in this server: nothing will remove dead rows", av)
	}
	_, _, err := s.UpdateSettings(ctx, map[string]json.RawMessage{
		"history_after_minutes": json.RawMessage(strconv.Itoa(*flagHistory))}, "flintbench")
	must(err)
	env := workerEnv(dbURL)
	cmd := startFlint([]string{"worker"}, env)
	defer stopFlint(cmd)
	sched := startFlint([]string{"scheduler"}, benchEnv(dbURL, freePort()))
	defer stopFlint(sched)

	start := time.Now()
	feedCtx, stopFeed := context.WithCancel(ctx)
	fed := feedNoops(feedCtx, s)

	var hold pgx.Tx
	holding, held := false, false
	fmt.Printf("%8s %10s %10s %8s %10s %10s %s\n", "t", "live", "dead", "queued", "vacuums", "history", "")
	next := time.Duration(0)
	var dead deadRows
	for el := time.Since(start); el < *flagDuration; el = time.Since(start) {
		switch {
		case !holding && !held && el >= *flagHoldFrom:
			tx, err := s.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			must(err)
			var one int
			must(tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM jobs LIMIT 1) x`).Scan(&one)) // takes the snapshot
			hold, holding = tx, true
		case holding && el >= *flagHoldFrom+*flagHold:
			must(hold.Commit(ctx))
			holding, held = false, true
		}
		if el >= next {
			dead.sample(ctx, s, el, holding)
			next += *flagSample
		}
		time.Sleep(200 * time.Millisecond)
	}
	if holding {
		must(hold.Commit(ctx))
	}
	stopFeed()
	n := <-fed
	fmt.Printf("sustain %s: %d jobs offered at %d/s for %s; dead rows at most %d outside the transaction, %d while it was open, %d at the end\n",
		*flagLabel, n, *flagRate, *flagDuration, dead.maxOutside, dead.maxDuring, dead.last)
	fmt.Printf("RESULT flint sustain %s dead_max_outside=%d dead_max_during=%d dead_end=%d\n", *flagLabel, dead.maxOutside, dead.maxDuring, dead.last)
}

// feedNoops enqueues -rate noop jobs a second, in tenths of a second,
// until ctx is done; then it sends how many it enqueued on the channel it
// returned.
func feedNoops(ctx context.Context, s *db.Store) <-chan int {
	fed := make(chan int)
	go func() {
		n, tick := 0, time.NewTicker(100*time.Millisecond)
		defer tick.Stop()
		for k := 1; ; k++ {
			select {
			case <-ctx.Done():
				fed <- n
				return
			case <-tick.C:
			}
			want := *flagRate*k/10 - *flagRate*(k-1)/10
			ps := make([]jobs.EnqueueParams, want)
			for i := range ps {
				ps[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
			}
			if want > 0 {
				_, err := s.Enqueue(ctx, ps...)
				if err != nil && ctx.Err() == nil {
					log.Fatal(err)
				}
				n += want
			}
		}
	}()
	return fed
}

// deadRows tracks the jobs table's dead rows across samples: the most
// seen while the transaction was open and outside it, and the last.
type deadRows struct {
	maxOutside, maxDuring, last int64
}

// sample prints one line of the jobs table's row counts at el and
// records its dead rows.
func (d *deadRows) sample(ctx context.Context, s *db.Store, el time.Duration, holding bool) {
	var live, dead, vacuums int64
	var queued int
	must(s.Pool().QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, autovacuum_count + vacuum_count FROM pg_stat_user_tables WHERE relname = 'jobs'`).Scan(&live, &dead, &vacuums))
	must(s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued' AND deleted_at IS NULL`).Scan(&queued))
	var history int64
	must(s.Pool().QueryRow(ctx, `SELECT coalesce(sum(n), 0)::bigint FROM job_history_counts`).Scan(&history))
	mark := ""
	if holding {
		mark = "REPEATABLE READ transaction open"
		d.maxDuring = max(d.maxDuring, dead)
	} else {
		d.maxOutside = max(d.maxOutside, dead)
	}
	d.last = dead
	fmt.Printf("%8s %10d %10d %8d %10d %10d %s\n", el.Round(time.Second), live, dead, queued, vacuums, history, mark)
}
