package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Flow control across real processes: every limit is decided by the
// claim statement in PostgreSQL, so these tests run several `flint worker`
// processes against one database and check what the database recorded.

func setQueue(t *testing.T, s *db.Store, name string, change func(q domain.QueueSettings) domain.QueueSettings) {
	t.Helper()
	_, err := s.UpdateQueue(context.Background(), name, "test", change)
	require.NoError(t, err)
}

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func dbNow(t *testing.T, conn *pgx.Conn) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT now()`).Scan(&now))
	return now
}

func queueJobs(queue string, n int, p jobs.EnqueueParams) []jobs.EnqueueParams {
	out := make([]jobs.EnqueueParams, n)
	for i := range out {
		out[i] = p
		out[i].Queue = queue
	}
	return out
}

func countWhere(t *testing.T, conn *pgx.Conn, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE `+where, args...).Scan(&n))
	return n
}

// TestFlowPauseAcrossProcesses: a pause stops claims in every worker
// process the moment it commits, and no job of the queue starts once a
// process has heard of it (what one had claimed ahead goes back), running
// jobs finish, enqueues are still accepted, and the pause
// survives the workers being restarted; resume lets the jobs run.
func TestFlowPauseAcrossProcesses(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	conn := connect(t, u)
	var ws []*proc
	for i := range 2 {
		ws = append(ws, startFlint(t, "worker", u, fmt.Sprintf("FLINT_WORKER_ID=pause-%d", i)))
	}
	for _, w := range ws {
		w.ready(t, 60*time.Second) // so the SIGTERM below finds its handler installed
	}
	enqueueAll(t, s, queueJobs("p", 40, sleepJob(150))...)
	waitFor(t, 30*time.Second, "jobs of p to start", func() bool {
		return countWhere(t, conn, `queue = 'p' AND started_at IS NOT NULL`) >= 4
	})

	setQueue(t, s, "p", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	paused := dbNow(t, conn) // after the pause committed
	enqueueAll(t, s, queueJobs("p", 5, sleepJob(10))...)
	enqueueAll(t, s, queueJobs("free", 5, sleepJob(10))...)
	waitFor(t, 30*time.Second, "running jobs of p to finish and free to run", func() bool {
		return countWhere(t, conn, `queue = 'p' AND status = 'running'`) == 0 &&
			countWhere(t, conn, `queue = 'free' AND status = 'completed'`) == 5
	})
	// Every process claims again after the pause (a job of another queue
	// starts on each): had one not seen the pause, those claims would have
	// taken the older jobs of p too.
	waitFor(t, 30*time.Second, "every worker to claim after the pause", func() bool {
		var workers int
		require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(DISTINCT worker_id) FROM jobs
			WHERE queue = 'probe' AND started_at > $1`, paused).Scan(&workers))
		if workers < len(ws) {
			enqueueAll(t, s, queueJobs("probe", 10, sleepJob(50))...) // more than one process takes at once
		}
		return workers == len(ws)
	})
	// A job of p may start after the pause only if its worker had claimed
	// it before, ahead of a free worker, and had not yet heard of the pause
	// (a notification away); once a worker has claimed after the pause it
	// knows, and starts none (it hands back what it had claimed ahead).
	require.Zero(t, countWhere(t, conn, `queue = 'p' AND started_at > $1 AND started_at > (
		SELECT min(q.started_at) FROM jobs q WHERE q.queue = 'probe' AND q.worker_id = jobs.worker_id AND q.started_at > $1)`, paused),
		"a job of p started after its worker knew of the pause")
	waiting := countWhere(t, conn, `queue = 'p' AND status = 'queued'`)
	require.Greater(t, waiting, 5, "paused jobs wait, new ones too")

	// Restart every worker: the pause lives in the database.
	for _, w := range ws {
		require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, w.wait(t, 30*time.Second))
	}
	for i := range 2 {
		startFlint(t, "worker", u, fmt.Sprintf("FLINT_WORKER_ID=pause-again-%d", i)).ready(t, 60*time.Second)
	}
	enqueueAll(t, s, queueJobs("free", 5, sleepJob(10))...)
	waitFor(t, 30*time.Second, "the restarted workers to run other queues", func() bool {
		return countWhere(t, conn, `queue = 'free' AND status = 'completed'`) == 10
	})
	require.Zero(t, countWhere(t, conn, `queue = 'p' AND started_at > $1`, paused), "a restarted worker started a paused job")

	setQueue(t, s, "p", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = false; return q })
	waitFor(t, 60*time.Second, "the resumed queue to drain", func() bool {
		return countWhere(t, conn, `queue = 'p' AND status <> 'completed'`) == 0
	})
}

// TestFlowConcurrencyExactAcrossProcesses: with a limit of 3, three worker
// processes (4 workers each) never run more than 3 jobs of the queue at
// once, sampled in the database throughout; one of them is SIGKILLed while
// it runs jobs, and its slots come back only when the reaper returns its
// jobs (they still count as running until then).
func TestFlowConcurrencyExactAcrossProcesses(t *testing.T) {
	t.Parallel()
	const limit = 3
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	conn := connect(t, u)
	sampler := connect(t, u)
	setQueue(t, s, "c", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = intp(limit); return q })
	enqueueAll(t, s, queueJobs("c", 45, sleepJob(150))...)

	halt := sampleRunning(t, sampler, "c")
	startFlint(t, "scheduler", u)
	// The victim starts first and the others once it runs jobs: started
	// together, the others were sometimes up first and, their pools
	// claiming again the moment a slot freed, ran every job before the
	// victim got one.
	victim := startFlint(t, "worker", u, "FLINT_WORKER_ID=victim", "DATABASE_URL="+withAppName(t, u, "flint-victim"))
	waitFor(t, 60*time.Second, "the victim to run a job of c", func() bool {
		return countWhere(t, conn, `queue = 'c' AND status = 'running' AND worker_id = 'victim'`) > 0
	})
	startFlint(t, "worker", u, "FLINT_WORKER_ID=w1")
	startFlint(t, "worker", u, "FLINT_WORKER_ID=w2")
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	// A claim the victim sent just before it died still commits: count
	// what it holds once its connections are gone, each statement done.
	waitFor(t, 30*time.Second, "the killed process's connections to close", func() bool {
		var n int
		require.NoError(t, conn.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = 'flint-victim'`).Scan(&n))
		return n == 0
	})
	var held int
	var firstOut time.Time // when the first of its leases runs out
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*), coalesce(min(lease_expires_at), now())
		FROM jobs WHERE queue = 'c' AND status = 'running' AND worker_id = 'victim'`).Scan(&held, &firstOut))
	require.Positive(t, held)
	// Until the reaper returns them (lease 2 s), the dead process's jobs
	// keep their slots: the others run at most limit - held at once. No
	// event marks "a while later, the leases not yet out": the scenario
	// looks again after 600 ms, in one snapshot, and holds the process's
	// jobs to it only while the database's clock says their leases are
	// not out (a machine that stalled the test past them leaves nothing
	// to check).
	time.Sleep(600 * time.Millisecond)
	var still, others int
	var leased bool
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE worker_id = 'victim'), count(*) FILTER (WHERE worker_id <> 'victim'), now() < $1
		FROM jobs WHERE queue = 'c' AND status = 'running'`, firstOut).Scan(&still, &others, &leased))
	if leased {
		require.Equal(t, held, still, "slots of a killed process came back before its leases were reaped")
		require.LessOrEqual(t, others, limit-held)
	} else {
		t.Logf("the killed process's leases ran out before the check (%d of %d jobs left): the machine stalled the test", still, held)
	}

	waitFor(t, 90*time.Second, "every job of c to complete", func() bool {
		return countWhere(t, conn, `queue = 'c' AND status <> 'completed'`) == 0
	})
	samples, maxSeen := halt()
	t.Logf("%d samples, most running at once: %d", samples, maxSeen)
	require.Greater(t, samples, 200)
	require.LessOrEqual(t, maxSeen, limit, "more jobs of the queue ran at once than its limit")
	require.Equal(t, limit, maxSeen, "the limit was reached: the test exercised it")
	var interrupted int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FROM job_executions e JOIN jobs j ON j.id = e.job_id WHERE j.queue = 'c' AND e.outcome = 'interrupted'`).Scan(&interrupted))
	require.Equal(t, held, interrupted, "the killed process's jobs were reaped and rerun")
}

// TestFlowRateLimitAcrossProcesses: 20 starts per second across three
// worker processes for 10 s start 160 to 220 jobs, and every second of the
// period gets its share: starts are spread, not bunched at the start.
func TestFlowRateLimitAcrossProcesses(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	conn := connect(t, u)
	setQueue(t, s, "r", func(q domain.QueueSettings) domain.QueueSettings {
		q.RateLimit = &domain.RateLimit{Limit: 20, PeriodSeconds: 1}
		return q
	})
	// Every process is up before the jobs arrive: a process still starting
	// would compete for the CPU with the first seconds of the period.
	for i := range 3 {
		startFlint(t, "worker", u, fmt.Sprintf("FLINT_WORKER_ID=rate-%d", i)).ready(t, 60*time.Second)
	}
	enqueueAll(t, s, queueJobs("r", 400, jobs.EnqueueParams{Type: jobs.TypeNoop})...)
	var first time.Time
	waitFor(t, 60*time.Second, "the first start", func() bool {
		return conn.QueryRow(context.Background(), `SELECT min(started_at) FROM jobs WHERE queue = 'r'`).Scan(&first) == nil && !first.IsZero()
	})
	end := first.Add(10 * time.Second)
	waitFor(t, 30*time.Second, "the period to pass", func() bool { return dbNow(t, conn).After(end.Add(500 * time.Millisecond)) })

	rows, err := conn.Query(context.Background(), `SELECT started_at FROM jobs WHERE queue = 'r' AND started_at < $1`, end)
	require.NoError(t, err)
	starts, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	require.NoError(t, err)
	buckets := make([]int, 10)
	for _, at := range starts {
		buckets[int(at.Sub(first)/time.Second)]++
	}
	t.Logf("%d starts in 10 s; per second: %v", len(starts), buckets)
	// At most the period's 200, the bucket's burst of 4 and what the
	// claims just before the first start took (220). At least 80 %:
	// a bucket holds a fifth of a period (domain.RateLimit.Burst), so a
	// claim that comes more than 200 ms late loses tokens by design, and
	// beside the rest of the suite (load 14 on 2 cores) the three
	// processes were starved that long often enough to start 170.
	require.LessOrEqual(t, len(starts), 220, "starts in 10 s at 20/s")
	require.GreaterOrEqual(t, len(starts), 160, "starts in 10 s at 20/s")
	// No second runs ahead of the limit (a burst); none is starved either.
	// A second in which the machine stalled the processes loses the
	// tokens of the stall by design (see above): beside the CPU hog of
	// make test-stress one got 8 (after 24 in the second before it). So
	// each second gets some, and every two seconds in a row at least
	// half of their 40.
	for i, n := range buckets {
		require.LessOrEqual(t, n, 26, "second %d of the period: %v", i, buckets)
		require.Positive(t, n, "second %d of the period: %v", i, buckets)
		if i > 0 {
			require.GreaterOrEqual(t, buckets[i-1]+n, 20, "seconds %d and %d of the period: %v", i-1, i, buckets)
		}
	}
	// Within each second, starts are spread too: no 100 ms holds much
	// more than the bucket's burst of 4 (a bucket of a whole period would
	// put a second's worth in one claim).
	tenths := map[int]int{}
	for _, at := range starts {
		tenths[int(at.Sub(first)/(100*time.Millisecond))]++
	}
	for k, n := range tenths {
		require.LessOrEqual(t, n, 8, "100 ms slot %d holds %d starts", k, n)
	}
}

// TestFlowFairnessAcrossProcesses: a tenant with 20,000 queued jobs (the
// issue's 100,000, scaled down for test time; the claim's cost does not
// depend on the backlog) and one with 10, enqueued after them, in a queue
// with per_key_concurrency 2 served by three processes: the small
// tenant's jobs all start within about 10 × 2 (active keys) starts,
// instead of after the big tenant's backlog.
func TestFlowFairnessAcrossProcesses(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	conn := connect(t, u)
	setQueue(t, s, "f", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = intp(2); return q })
	big := queueJobs("f", 20_000, jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(`{"ms": 5}`), ConcurrencyKey: "big-tenant"})
	for i := 0; i < len(big); i += 5000 {
		enqueueAll(t, s, big[i:i+5000]...)
	}
	enqueueAll(t, s, queueJobs("f", 10, jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(`{"ms": 5}`), ConcurrencyKey: "small"})...)
	// The default lease, not the tests' 2 s: a claim is given its lease
	// to answer (its jobs' leases would be out on arrival otherwise), and
	// on a starved machine (the suite beside a CPU hog) fair queues'
	// claims took over 2 s and were cut short. One cut short after the
	// database committed it leaves its jobs leased to a process that
	// never learnt of them, for the reaper to return; no scheduler runs
	// here. That run started 8 of the small tenant's 10 jobs in its first
	// two seconds and none of the other two in the next 48.
	for i := range 3 {
		startFlint(t, "worker", u, fmt.Sprintf("FLINT_WORKER_ID=fair-%d", i), "FLINT_LEASE_TTL=30s")
	}
	waitFor(t, 60*time.Second, "the small tenant's jobs to complete", func() bool {
		return countWhere(t, conn, `queue = 'f' AND concurrency_key = 'small' AND status = 'completed'`) == 10
	})
	rows, err := conn.Query(context.Background(),
		`SELECT concurrency_key, started_at FROM jobs WHERE queue = 'f' AND started_at IS NOT NULL ORDER BY started_at, id`)
	require.NoError(t, err)
	type start struct {
		Key string
		At  time.Time
	}
	starts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[start])
	require.NoError(t, err)
	sort.SliceStable(starts, func(i, j int) bool { return starts[i].At.Before(starts[j].At) })
	last := -1
	for i, st := range starts {
		if st.Key == "small" {
			last = i
		}
	}
	t.Logf("the small tenant's last job was start %d of %d", last+1, len(starts))
	require.Less(t, last+1, 10*2+6, "the small tenant waited behind the big one")
}

func intp(n int) *int { return &n }

// withAppName returns the database URL u with an application_name, by
// which pg_stat_activity tells that process's connections apart.
func withAppName(t *testing.T, u, name string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	q := parsed.Query()
	q.Set("application_name", name)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// sampleRunning counts the running jobs of queue, over and over, on its
// own connection until halt is called (by the cleanups at the latest, so
// that it stops before they close the connection); halt returns how many
// samples were taken and the most running at once.
func sampleRunning(t *testing.T, sampler *pgx.Conn, queue string) (halt func() (samples, maxSeen int)) {
	var (
		mu      sync.Mutex
		maxSeen int
		samples int
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			if err := sampler.QueryRow(context.Background(),
				`SELECT count(*) FROM jobs WHERE status = 'running' AND queue = $1`, queue).Scan(&n); err != nil {
				return
			}
			mu.Lock()
			maxSeen, samples = max(maxSeen, n), samples+1
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // the sampling rate
		}
	}()
	var stopOnce sync.Once
	halt = func() (int, int) {
		stopOnce.Do(func() { close(stop) })
		<-done
		mu.Lock()
		defer mu.Unlock()
		return samples, maxSeen
	}
	t.Cleanup(func() { halt() })
	return halt
}
