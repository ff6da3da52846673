//go:build soak

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// TestSoakChaos runs Flint for SOAK_DURATION (default 2 min) under a steady
// stream of jobs while worker processes are SIGKILLed, SIGTERMed and
// restarted at random, with a long-running transaction held open the whole
// time (the classic way to make a PostgreSQL queue bloat and slow down).
// At the end every job must have completed exactly once.
//
//	make soak                      # 2 minutes
//	SOAK_DURATION=30m make soak    # longer
//
//flint:long a soak scenario: load and chaos, then the tally, read best top to bottom
func TestSoakChaos(t *testing.T) {
	duration := 2 * time.Minute
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		duration = d
	}
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	ctx := context.Background()

	// A reader that never lets go.
	tx, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n))
	defer tx.Rollback(ctx)

	env := []string{"FLINT_LEASE_TTL=2s", "FLINT_HEARTBEAT_INTERVAL=500ms", "LOG_LEVEL=warn", "FLINT_WORKERS=20"}
	startFlint(t, "scheduler", u, env...)
	var mu sync.Mutex
	workers := map[int]*proc{}
	next := 0
	spawn := func() {
		mu.Lock()
		defer mu.Unlock()
		next++
		workers[next] = startFlint(t, "worker", u, append(env, fmt.Sprintf("FLINT_WORKER_ID=soak-%d", next))...)
	}
	spawn()
	spawn()

	stop := make(chan struct{})
	var enqueued atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // producer: ~500 jobs/s in batches
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			batch := make([]jobs.EnqueueParams, 50)
			for i := range batch {
				ms := rand.IntN(40)
				batch[i] = jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(fmt.Sprintf(`{"ms":%d}`, ms)), Priority: 1 + rand.IntN(3)}
			}
			if _, err := s.Enqueue(ctx, batch...); err != nil {
				t.Error(err)
				return
			}
			enqueued.Add(int64(len(batch)))
		}
	}()
	go func() { // chaos: kill or drain a worker every few seconds, start a new one
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(3+rand.IntN(5)) * time.Second):
			}
			mu.Lock()
			for id, p := range workers {
				if rand.IntN(2) == 0 {
					_ = p.cmd.Process.Signal(syscall.SIGKILL)
				} else {
					_ = p.cmd.Process.Signal(syscall.SIGTERM)
				}
				delete(workers, id)
				break
			}
			mu.Unlock()
			spawn()
		}
	}()

	time.Sleep(duration) // the soak itself: load and chaos for its whole length
	close(stop)
	wg.Wait()
	total := int(enqueued.Load())
	t.Logf("enqueued %d jobs over %s with chaos", total, duration)

	waitAllCompleted(t, s, total, 3*time.Minute)
	var twice, interrupted int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM job_executions WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) > 1) x`).Scan(&twice))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM job_executions WHERE outcome = 'interrupted'`).Scan(&interrupted))
	require.Zero(t, twice, "no job completed twice")
	t.Logf("all %d completed once; %d runs were interrupted by the chaos and rerun", total, interrupted)
	var dead int64
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs'`).Scan(&dead))
	t.Logf("dead tuples in jobs with a reader held open all along: %d", dead)
}
