package workers_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// fastBundle wires a store to Redis the way flint does with
// FLINT_READY_QUEUE=redis: events keep the ready queue in step, the pool
// pops candidates from it, and recovery rebuilds it.
type fastBundle struct {
	*testBundle
	redis  *db.Redis
	bus    *db.EventBus
	prefix string
	// rebuilt is closed once the ready queue's rebuild at Redis's first
	// ping has finished.
	rebuilt chan struct{}
}

func fastSetup(t *testing.T, redisURL, prefix string) *fastBundle {
	t.Helper()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := db.OpenRedis(ctx, redisURL, prefix, quietLogger())
	require.NoError(t, err)
	b.store.SetRedis(r)
	bus := db.NewEventBus(b.store, r, true, quietLogger(), nil)
	b.store.SetEventSink(bus)
	rebuilt := make(chan struct{})
	var once sync.Once
	r.OnRecover(func() {
		_, _ = b.store.RebuildReadyQueue(context.Background(), r)
		once.Do(func() { close(rebuilt) })
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = bus.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); r.Close() })
	return &fastBundle{testBundle: b, redis: r, bus: bus, prefix: prefix, rebuilt: rebuilt}
}

// recorder registers a job type that counts its runs per job.
func (b *testBundle) recorder(name string) *runCounter {
	rc := &runCounter{runs: map[uuid.UUID]int{}}
	b.registry.Register(name, jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		rc.mu.Lock()
		rc.runs[j.ID]++
		rc.mu.Unlock()
		rc.total.Add(1)
		return nil, nil
	}))
	return rc
}

type runCounter struct {
	mu    sync.Mutex
	runs  map[uuid.UUID]int
	total atomic.Int64
}

func (rc *runCounter) get(id uuid.UUID) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.runs[id]
}

func (b *testBundle) enqueueMany(t *testing.T, typ string, n int) []uuid.UUID {
	t.Helper()
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: typ, Priority: 1 + i%3}
	}
	var ids []uuid.UUID
	for start := 0; start < n; start += 1000 {
		res, err := b.store.Enqueue(b.ctx, params[start:min(start+1000, n)]...)
		require.NoError(t, err)
		for _, r := range res {
			ids = append(ids, r.Job.ID)
		}
	}
	return ids
}

// TestReadyQueueStaleEntriesNeverRun puts the ids of a completed job, a
// cancelled job and a job that does not exist at the head of the ready
// queue: none of them may run; the real queued jobs all run, once.
func TestReadyQueueStaleEntriesNeverRun(t *testing.T) {
	t.Parallel()
	url, prefix := dbtest.RedisPrefix(t)
	b := fastSetup(t, url, prefix)
	rc := b.recorder("record")

	done := b.enqueue(t, "record", `{}`)
	c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSucceeded}})
	require.NoError(t, err)
	cancelled := b.enqueue(t, "record", `{}`)
	_, err = b.store.CancelJob(b.ctx, cancelled.ID)
	require.NoError(t, err)
	unknown := uuid.Must(uuid.NewV7())
	real := b.enqueueMany(t, "record", 50)

	// Wait until the events have put the real jobs in the ready queue, then
	// plant the stale ids in front of them (score 0 sorts first).
	require.Eventually(t, func() bool {
		n, _ := b.redis.ReadyLen(b.ctx)
		return n == 50
	}, 10*time.Second, 10*time.Millisecond)
	for _, id := range []uuid.UUID{done.ID, cancelled.ID, unknown} {
		require.NoError(t, b.redis.Client().ZAdd(b.ctx, prefix+"ready", redis.Z{Score: 0, Member: id.String()}).Err())
	}

	b.start(t, workers.Config{Workers: 4, FastPath: db.NewReadyQueue(b.store, b.redis)})
	for _, id := range real {
		b.waitFor(t, id, 30*time.Second, status(jobs.StateCompleted))
	}
	for _, id := range real {
		require.Equal(t, 1, rc.get(id))
	}
	require.Zero(t, rc.get(done.ID), "a completed job in the ready queue never runs again")
	require.Zero(t, rc.get(cancelled.ID), "a cancelled job in the ready queue never runs")
	require.Zero(t, rc.get(unknown))
	require.Equal(t, jobs.StateCancelled, b.jobStatus(t, cancelled.ID))
	n, err := b.redis.ReadyLen(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "stale entries are consumed, not left to loop")
}

// TestRedisKilledMidRun kills Redis (SIGKILL) while a few thousand jobs
// run through the fast path: processing continues from PostgreSQL with no
// job lost and none run twice, and the fast path comes back by itself.
func TestRedisKilledMidRun(t *testing.T) {
	t.Parallel()
	srv := dbtest.StartRedis(t)
	b := fastSetup(t, srv.URL(), "flint:")
	rc := b.recorder("count")
	b.registry.Register("slowcount", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		time.Sleep(5 * time.Millisecond) // the scenario: each run takes a while, so kills land mid-run
		rc.mu.Lock()
		rc.runs[j.ID]++
		rc.mu.Unlock()
		rc.total.Add(1)
		return nil, nil
	}))
	ids := b.enqueueMany(t, "slowcount", 3000)
	b.start(t, workers.Config{Workers: 10, FastPath: db.NewReadyQueue(b.store, b.redis)})

	require.Eventually(t, func() bool { return rc.total.Load() >= 500 }, 60*time.Second, 5*time.Millisecond)
	srv.Kill()
	require.Eventually(t, func() bool { return !b.redis.Healthy() }, 10*time.Second, 10*time.Millisecond)
	require.Less(t, rc.total.Load(), int64(3000), "the kill happened mid-run")
	require.Eventually(t, func() bool { return rc.total.Load() >= 3000 }, 120*time.Second, 10*time.Millisecond, "processing continues without Redis")

	var completed, succeededRuns int
	require.Eventually(t, func() bool {
		_ = b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE status = 'completed'`).Scan(&completed)
		return completed == 3000
	}, 30*time.Second, 10*time.Millisecond, "zero lost: every job completed (%d)", completed)
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM job_executions WHERE outcome = 'succeeded'`).Scan(&succeededRuns))
	require.Equal(t, 3000, completed, "zero lost")
	require.Equal(t, 3000, succeededRuns, "zero double-completed")
	for _, id := range ids {
		require.Equal(t, 1, rc.get(id), "job %s ran %d times", id, rc.get(id))
	}

	// Redis returns: the fast path is rebuilt from PostgreSQL by itself.
	srv.Start()
	require.Eventually(t, b.redis.Healthy, 10*time.Second, 20*time.Millisecond)
	zero := 0
	_, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: "count", Queue: "later", MaxRetries: &zero, RunAt: ptr(time.Now().Add(-time.Second))})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return rc.total.Load() == 3001 }, 30*time.Second, 10*time.Millisecond)
}

// TestRedisFlushedNoSpuriousReaps flushes Redis over and over while jobs
// that outlive several lease renewals run: no job may be reaped, since
// liveness is decided in PostgreSQL alone.
func TestRedisFlushedNoSpuriousReaps(t *testing.T) {
	t.Parallel()
	srv := dbtest.StartRedis(t)
	b := fastSetup(t, srv.URL(), "flint:")
	params := make([]jobs.EnqueueParams, 40)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms":1500}`)}
	}
	res, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)
	b.start(t, workers.Config{Workers: 40, LeaseTTL: time.Second, HeartbeatInterval: 200 * time.Millisecond,
		FastPath: db.NewReadyQueue(b.store, b.redis)})
	reaper := scheduler.NewReaper(scheduler.ReaperConfig{Interval: 100 * time.Millisecond}, b.store, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { _ = reaper.Run(ctx) }()
	flusher := srv.Client()
	go func() {
		for ctx.Err() == nil {
			flusher.FlushAll(ctx)
			time.Sleep(100 * time.Millisecond) // the scenario: Redis loses everything ten times a second
		}
	}()
	for _, r := range res {
		b.waitFor(t, r.Job.ID, 60*time.Second, status(jobs.StateCompleted))
	}
	var interrupted int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM job_executions WHERE outcome = 'interrupted'`).Scan(&interrupted))
	require.Zero(t, interrupted, "no spurious reaps")
}

// TestPoolWithFastPathRunsEveryJobOnce is the pool's basic guarantee with
// the Redis ready queue in front of the claim.
func TestPoolWithFastPathRunsEveryJobOnce(t *testing.T) {
	t.Parallel()
	url, prefix := dbtest.RedisPrefix(t)
	b := fastSetup(t, url, prefix)
	rc := b.recorder("count")
	ids := b.enqueueMany(t, "count", 500)
	b.start(t, workers.Config{Workers: 8, FastPath: db.NewReadyQueue(b.store, b.redis)})
	require.Eventually(t, func() bool { return rc.total.Load() >= 500 }, 60*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		b.waitFor(t, id, 10*time.Second, status(jobs.StateCompleted))
		require.Equal(t, 1, rc.get(id))
	}
}

func (b *testBundle) jobStatus(t *testing.T, id uuid.UUID) jobs.State {
	t.Helper()
	j, err := b.store.GetJob(b.ctx, id)
	require.NoError(t, err)
	return j.Status
}

func ptr[T any](v T) *T { return &v }

// TestAgingRescoresTheReadyQueue: when aging raises a waiting job's
// priority, its place in the Redis ready queue moves too.
func TestAgingRescoresTheReadyQueue(t *testing.T) {
	t.Parallel()
	url, prefix := dbtest.RedisPrefix(t)
	b := fastSetup(t, url, prefix)
	// The rebuild at start reads the jobs table; one that read the job
	// before it aged and wrote after the re-score would put the old score
	// back, and nothing would correct it until Redis came back again.
	select {
	case <-b.rebuilt:
	case <-time.After(30 * time.Second):
		t.Fatal("the ready queue was not rebuilt at start")
	}
	old := time.Now().Add(-time.Hour)
	j := b.enqueue(t, jobs.TypeNoop, `{}`, func(p *jobs.EnqueueParams) { p.Priority = jobs.PriorityLow; p.RunAt = &old })
	var before float64
	require.Eventually(t, func() bool {
		s, err := b.redis.Client().ZScore(b.ctx, prefix+"ready", j.ID.String()).Result()
		before = s
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	n, err := b.store.AgeQueued(b.ctx, domain.DefaultSettings(), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		s, err := b.redis.Client().ZScore(b.ctx, prefix+"ready", j.ID.String()).Result()
		return err == nil && s < before
	}, 10*time.Second, 10*time.Millisecond, "the aged job moved up in the ready queue")
}

// TestWorkerRegistryTTL: a registered worker is listed, and disappears once
// its heartbeat is older than the TTL, in Redis mode and from PostgreSQL.
// TestReadyQueueFollowsTheLastEventOfABatch: a job claimed and handed back
// within one batch of events ends up in the ready queue.
func TestReadyQueueFollowsTheLastEventOfABatch(t *testing.T) {
	t.Parallel()
	url, prefix := dbtest.RedisPrefix(t)
	b := fastSetup(t, url, prefix)
	now := time.Now()
	back, gone := uuid.New(), uuid.New()
	b.bus.Publish([]domain.Event{
		{JobID: back, Status: jobs.StateRunning, At: now},
		{JobID: gone, Status: jobs.StateQueued, At: now, EffectivePriority: 1, RunAt: now},
		{JobID: back, Status: jobs.StateQueued, At: now, EffectivePriority: 1, RunAt: now},
		{JobID: gone, Status: jobs.StateRunning, At: now},
	})
	key := prefix + "ready"
	require.Eventually(t, func() bool {
		return b.redis.Client().ZScore(b.ctx, key, back.String()).Err() == nil
	}, 10*time.Second, 10*time.Millisecond, "the handed-back job is ready")
	require.ErrorIs(t, b.redis.Client().ZScore(b.ctx, key, gone.String()).Err(), redis.Nil, "the claimed job is not")
}

func TestWorkerRegistryTTL(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"postgres", "redis"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if mode == "redis" {
				url, prefix := dbtest.RedisPrefix(t)
				fb := fastSetup(t, url, prefix)
				b = fb.testBundle
			}
			info := domain.WorkerInfo{ID: "w-" + mode, Host: "h", PID: 1, Concurrency: 4, Version: "test", StartedAt: time.Now(), HeartbeatAt: time.Now()}
			require.NoError(t, b.store.RegisterWorker(b.ctx, info, time.Second))
			ws, err := b.store.ListWorkers(b.ctx, time.Second)
			require.NoError(t, err)
			require.Len(t, ws, 1)
			require.Equal(t, info.ID, ws[0].ID)
			require.Eventually(t, func() bool {
				ws, err := b.store.ListWorkers(b.ctx, time.Second)
				return err == nil && len(ws) == 0
			}, 5*time.Second, 50*time.Millisecond, "gone within its TTL")
		})
	}
}

// TestRedisSubscriberBacksOffWhenRefused: a Redis that answers PING but
// refuses SUBSCRIBE (an ACL) gets a few retries, not a busy loop.
func TestRedisSubscriberBacksOffWhenRefused(t *testing.T) {
	t.Parallel()
	srv := dbtest.StartRedis(t)
	admin := srv.Client()
	require.NoError(t, admin.Do(context.Background(), "ACL", "SETUSER", "nosub", "on", ">pw", "~*", "&*", "+@all", "-subscribe").Err())
	store, _ := dbtest.NewStore(t)
	url := strings.Replace(srv.URL(), "redis://", "redis://nosub:pw@", 1)
	r, err := db.OpenRedis(context.Background(), url, "acl:", quietLogger())
	require.NoError(t, err)
	defer r.Close()
	require.True(t, r.Healthy())
	bus := db.NewEventBus(store, r, false, quietLogger(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, bus.RunRedisSubscriber(ctx))

	entries, err := admin.Do(context.Background(), "ACL", "LOG", "100").Slice()
	require.NoError(t, err)
	refused := int64(0)
	for _, e := range entries {
		fields, ok := e.(map[any]any)
		if !ok {
			// RESP2 replies are flat [key, value, ...] lists.
			fields = map[any]any{}
			if flat, ok := e.([]any); ok {
				for i := 0; i+1 < len(flat); i += 2 {
					fields[flat[i]] = flat[i+1]
				}
			}
		}
		if fields["username"] == "nosub" {
			refused += fields["count"].(int64)
		}
	}
	require.Positive(t, refused, "the subscription was tried and refused")
	require.LessOrEqual(t, refused, int64(15), "retries back off")
}
