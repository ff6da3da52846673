package workers_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// countingStore counts the pool's ordinary claims.
type countingStore struct {
	*db.Store
	claims atomic.Int64
}

func (c *countingStore) ClaimJobs(ctx context.Context, p domain.ClaimParams) ([]*jobs.Job, error) {
	c.claims.Add(1)
	return c.Store.ClaimJobs(ctx, p)
}

// TestPausedAndLimitedQueuesDoNotSpin: with the Redis fast path on, a
// paused queue's backlog and wake-ups and a rate-limited queue's waiting
// jobs make the pool claim at the pace of its poll and the rate's tokens,
// not in a loop; the paused jobs never run and the limited ones start at
// their rate.
func TestPausedAndLimitedQueuesDoNotSpin(t *testing.T) {
	t.Parallel()
	url, prefix := dbtest.RedisPrefix(t)
	b := fastSetup(t, url, prefix)
	_, err := b.store.UpdateQueue(b.ctx, "p", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	require.NoError(t, err)
	_, err = b.store.UpdateQueue(b.ctx, "r", "test", func(q domain.QueueSettings) domain.QueueSettings {
		q.RateLimit = &domain.RateLimit{Limit: 2, PeriodSeconds: 1}
		return q
	})
	require.NoError(t, err)
	ps := make([]jobs.EnqueueParams, 0, 250)
	for range 200 {
		ps = append(ps, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "p"})
	}
	for range 50 {
		ps = append(ps, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "r"})
	}
	_, err = b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)

	cs := &countingStore{Store: b.store}
	pool := workers.NewPool(workers.Config{WorkerID: "spin", Workers: 8, PollInterval: time.Second,
		FastPath: db.NewReadyQueue(b.store, b.redis)}, cs, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	// The scenario is a span of time, the claims counted over it: for two
	// seconds, an enqueue notification for the paused queue every 20 ms,
	// then one more second of polls.
	for range 100 {
		pool.Wake("p")
		time.Sleep(20 * time.Millisecond) // the pace of the notifications, part of the scenario
	}
	time.Sleep(time.Second) // one more second of polls, the span the claims are counted over
	cancel()
	require.NoError(t, <-done)

	claims := cs.claims.Load()
	t.Logf("%d claims in 3 s", claims)
	require.Less(t, claims, int64(40), "the pool spun on queues it cannot take jobs from")
	var pRun, rRun int
	for _, q := range []string{"p", "r"} {
		info, err := b.store.GetQueue(b.ctx, q)
		require.NoError(t, err)
		n := int(info.Counts[jobs.StateCompleted] + info.Counts[jobs.StateRunning])
		if q == "p" {
			pRun = n
		} else {
			rRun = n
		}
	}
	require.Zero(t, pRun, "a paused job ran")
	require.GreaterOrEqual(t, rRun, 4, "the rate-limited queue started at its rate")
	require.LessOrEqual(t, rRun, 9, "2 per second for about 3 s, plus its burst")
}
