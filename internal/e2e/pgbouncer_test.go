package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// pgbouncerServerLimit is max_db_connections of the PgBouncer that
// scripts/services.sh starts: the server connections one database may
// have, however many clients connect.
const pgbouncerServerLimit = 40

// pgbouncerURL returns TEST_PGBOUNCER_URL (default: the PgBouncer of
// scripts/services.sh on 127.0.0.1:6432). It fails the test, with what to
// run, when PgBouncer does not answer.
func pgbouncerURL(t *testing.T) *url.URL {
	t.Helper()
	raw := os.Getenv("TEST_PGBOUNCER_URL")
	if raw == "" {
		raw = "postgres://postgres@127.0.0.1:6432/postgres?sslmode=disable"
	}
	u, err := url.Parse(raw)
	require.NoError(t, err, "TEST_PGBOUNCER_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, bouncerAdminURL(u))
	if err == nil {
		_, err = admin.Exec(ctx, "SHOW VERSION")
		_ = admin.Close(ctx)
	}
	if err != nil {
		t.Fatalf("PgBouncer is not reachable at %s (%v): run scripts/services.sh ensure pgbouncer (make test does), "+
			"or set TEST_PGBOUNCER_URL", u.Host, err)
	}
	return u
}

// bouncerAdminURL is PgBouncer's admin console (database pgbouncer) at u's
// address, which speaks only the simple query protocol.
func bouncerAdminURL(u *url.URL) string {
	a := *u
	a.Path = "/pgbouncer"
	q := a.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	a.RawQuery = q.Encode()
	return a.String()
}

// bouncerServers samples PgBouncer's SHOW POOLS for database name until
// stop is closed, and returns the most server connections it saw open at
// once and the most clients it saw waiting for one.
func bouncerServers(t *testing.T, bouncer, name string, stop <-chan struct{}) (maxServers, maxWaiting *int, done *sync.WaitGroup) {
	t.Helper()
	u, err := url.Parse(bouncer)
	require.NoError(t, err)
	admin, err := pgx.Connect(context.Background(), bouncerAdminURL(u))
	require.NoError(t, err)
	num := func(v any) int {
		n, _ := strconv.Atoi(fmt.Sprint(v))
		return n
	}
	maxServers, maxWaiting, done = new(int), new(int), &sync.WaitGroup{}
	done.Go(func() {
		defer admin.Close(context.Background())
		for {
			rows, err := admin.Query(context.Background(), "SHOW POOLS")
			if err != nil {
				t.Errorf("SHOW POOLS: %v", err)
				return
			}
			maps, err := pgx.CollectRows(rows, pgx.RowToMap)
			if err != nil {
				t.Errorf("SHOW POOLS: %v", err)
				return
			}
			for _, m := range maps {
				if m["database"] != name {
					continue
				}
				servers := 0
				for _, col := range []string{"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"} {
					servers += num(m[col])
				}
				*maxServers = max(*maxServers, servers)
				*maxWaiting = max(*maxWaiting, num(m["cl_waiting"]))
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return maxServers, maxWaiting, done
}

// TestThroughPgBouncer runs four worker processes of 250 workers each and
// a scheduler through PgBouncer in transaction-pooling mode, capped at 40
// server connections and kept saturated by other clients: 20,000 jobs,
// enqueued through PgBouncer as well, must all complete, each run exactly
// once, and PgBouncer must never have had more than 40 server connections. Three workers LISTEN over a
// direct connection (FLINT_DIRECT_DATABASE_URL); the fourth and the
// scheduler have none and must find their work by polling. The fourth
// alone also serves a queue of its own, whose 200 jobs only its polls
// can find: the others' claims may drain everything else before it starts.
//
//flint:long a multi-process scenario through PgBouncer, set up, loaded and checked in order, reads best top to bottom
func TestThroughPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PgBouncer and flint processes")
	}
	bu := pgbouncerURL(t)
	flintBinary(t)
	direct := dbtest.NewDatabase(t)
	du, err := url.Parse(direct)
	require.NoError(t, err)
	name := strings.TrimPrefix(du.Path, "/")
	bu.Path = "/" + name
	bouncer := bu.String()

	ctx := context.Background()
	s, err := db.Open(ctx, db.Config{URL: bouncer, Pooler: db.PoolerPgBouncer, MaxConns: pgbouncerServerLimit + 20})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	const total = 20000
	// pollQueue's jobs are served by the fourth worker alone, which has no
	// LISTEN connection.
	const pollQueue, pollJobs = "polled", 200
	enqueueNoops(t, s, total/2)

	stop := make(chan struct{})
	maxServers, maxWaiting, sampled := bouncerServers(t, bouncer, name, stop)
	var busy sync.WaitGroup
	finish := sync.OnceFunc(func() {
		close(stop)
		sampled.Wait()
		busy.Wait()
	})
	defer finish()

	// Other clients of the same database keep more transactions open than
	// PgBouncer has server connections, so Flint's statements queue for
	// the 40 like everyone else's and the cap is reached, not just obeyed.
	for range pgbouncerServerLimit + 10 {
		busy.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = s.Pool().Exec(ctx, `SELECT pg_sleep(0.01)`)
			}
		})
	}

	// Production timings: every statement, heartbeats too, may queue in
	// PgBouncer for a server connection, which the test timings of
	// startFlint (a 400 ms heartbeat deadline) do not allow for here.
	env := []string{"FLINT_DATABASE_POOLER=pgbouncer", "FLINT_WORKERS=250", "LOG_LEVEL=info", "FLINT_POLL_INTERVAL=1s",
		"FLINT_LEASE_TTL=30s", "FLINT_HEARTBEAT_INTERVAL=5s"}
	start := time.Now()
	var procs []*proc
	for i := 1; i <= 4; i++ {
		e := append(env[:len(env):len(env)], fmt.Sprintf("FLINT_WORKER_ID=bouncer-%d", i))
		if i < 4 {
			e = append(e, "FLINT_DIRECT_DATABASE_URL="+direct, "FLINT_QUEUES="+jobs.DefaultQueue)
		} else {
			e = append(e, "FLINT_QUEUES="+jobs.DefaultQueue+","+pollQueue)
		}
		procs = append(procs, startFlint(t, "worker", bouncer, e...))
	}
	procs = append(procs, startFlint(t, "scheduler", bouncer, env...))
	for _, p := range procs {
		p.ready(t, time.Minute)
	}
	enqueueNoops(t, s, total/2) // while they run: wakes go out by NOTIFY
	// Jobs only the worker without LISTEN serves: however fast the others
	// drain the rest, it has work that only its polls can find.
	polled := make([]jobs.EnqueueParams, pollJobs)
	for i := range polled {
		polled[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: pollQueue}
	}
	_, err = s.Enqueue(ctx, polled...)
	require.NoError(t, err)

	waitAllCompleted(t, s, total+pollJobs, 3*time.Minute) // through PgBouncer
	elapsed := time.Since(start)
	finish()

	var runs, succeeded, twice int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'succeeded') FROM job_executions`).Scan(&runs, &succeeded))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM job_executions GROUP BY job_id HAVING count(*) > 1) x`).Scan(&twice))
	require.Equal(t, total+pollJobs, succeeded, "one succeeded run per job")
	require.Equal(t, total+pollJobs, runs, "no job ran more than once")
	require.Zero(t, twice, "no job ran twice")

	rows, err := s.Pool().Query(ctx, `SELECT worker_id, count(*) FROM job_executions GROUP BY worker_id ORDER BY worker_id`)
	require.NoError(t, err)
	perWorker := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		require.NoError(t, rows.Scan(&id, &n))
		perWorker[id] = n
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, perWorker["bouncer-4"], pollJobs, "the worker without LISTEN found jobs by polling: %v", perWorker)
	var elsewhere int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM job_executions e JOIN jobs j ON j.id = e.job_id
		WHERE j.queue = $1 AND e.worker_id <> 'bouncer-4'`, pollQueue).Scan(&elsewhere))
	require.Zero(t, elsewhere, "only the fourth worker serves %s", pollQueue)

	for i, p := range procs {
		out := p.out.String()
		require.NotContains(t, out, "prepared statement", "process %d", i+1)
		require.NotContains(t, out, `"level":"ERROR"`, "process %d", i+1)
	}
	require.Contains(t, procs[3].out.String(), "LISTEN is off", "the worker without a direct connection polls")
	require.NotContains(t, procs[0].out.String(), "LISTEN is off", "a worker with a direct connection listens")

	require.Equal(t, pgbouncerServerLimit, *maxServers, "server connections PgBouncer had open for the database at most")
	require.Positive(t, *maxWaiting, "clients queued for a server connection")
	t.Logf("%d jobs by 1,000 workers in 4 processes through PgBouncer in %s (%.0f jobs/s, half of them enqueued meanwhile); "+
		"at most %d server connections, %d clients waiting for one; runs per worker %v",
		total, elapsed.Round(time.Millisecond), total/elapsed.Seconds(), *maxServers, *maxWaiting, perWorker)
}
