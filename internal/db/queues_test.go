package db_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func (b *testBundle) setQueue(t *testing.T, queue string, change func(q domain.QueueSettings) domain.QueueSettings) domain.QueueSettings {
	t.Helper()
	q, err := b.store.UpdateQueue(b.ctx, queue, "test", change)
	require.NoError(t, err)
	return q
}

func (b *testBundle) claimQ(t *testing.T, limit int, held *domain.FlowHold, queues ...string) []*jobs.Job {
	t.Helper()
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: limit, LeaseTTL: time.Minute, Queues: queues, Held: held})
	require.NoError(t, err)
	return got
}

func (b *testBundle) enqueueN(t *testing.T, n int, p jobs.EnqueueParams) {
	t.Helper()
	if p.Type == "" {
		p.Type = jobs.TypeNoop
	}
	ps := make([]jobs.EnqueueParams, n)
	for i := range ps {
		ps[i] = p
	}
	_, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
}

func intp(n int) *int { return &n }

// keyCounts counts jobs per concurrency key, "-" for none.
func keyCounts(js []*jobs.Job) map[string]int {
	keys := map[string]int{}
	for _, j := range js {
		k := "-"
		if j.ConcurrencyKey != nil {
			k = *j.ConcurrencyKey
		}
		keys[k]++
	}
	return keys
}

// TestClaimHonoursPauseAndConcurrency: a paused queue gives nothing (to a
// claim of all queues, of it by name, or by id) while other queues are
// claimed as usual; a concurrency limit counts the running jobs of every
// claimer, and a slot comes back when a job ends.
func TestClaimHonoursPauseAndConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueueN(t, 5, jobs.EnqueueParams{Queue: "p"})
	b.enqueueN(t, 5, jobs.EnqueueParams{Queue: "c"})
	b.enqueueN(t, 3, jobs.EnqueueParams{Queue: "free"})
	b.setQueue(t, "p", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	b.setQueue(t, "c", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = intp(2); return q })

	var held domain.FlowHold
	got := b.claimQ(t, 100, &held)
	byQueue := map[string]int{}
	for _, j := range got {
		byQueue[j.Queue]++
	}
	require.Equal(t, map[string]int{"c": 2, "free": 3}, byQueue)
	require.True(t, held.Waiting, "c still has queued jobs")
	require.Empty(t, b.claimQ(t, 100, nil, "p", "c"), "paused, and c at its limit")

	// One ends: one slot.
	c := got[0]
	if c.Queue != "c" {
		c = got[len(got)-1]
	}
	for _, j := range got {
		if j.Queue == "c" {
			c = j
		}
	}
	b.finish(t, c, domain.Finish{Lease: domain.LeaseOf(c), Outcome: domain.OutcomeSucceeded})
	again := b.claimQ(t, 100, nil)
	require.Len(t, again, 1)
	require.Equal(t, "c", again[0].Queue)

	// Resumed: the paused backlog flows again; lifting the limit frees c.
	b.setQueue(t, "p", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = false; return q })
	b.setQueue(t, "c", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = nil; return q })
	rest := b.claimQ(t, 100, nil)
	require.Len(t, rest, 5+2)
}

// TestClaimRateLimitChargesStartedJobs: the bucket starts with its burst
// and is charged per job started, not per claim: claims that find the
// queue empty or take fewer jobs than the tokens allow cost nothing more.
func TestClaimRateLimitChargesStartedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 5 per 100 s: a burst of 1 token, the next after 20 s.
	b.setQueue(t, "r", func(q domain.QueueSettings) domain.QueueSettings {
		q.RateLimit = &domain.RateLimit{Limit: 5, PeriodSeconds: 100}
		return q
	})
	var held domain.FlowHold
	for range 5 { // empty queue: nothing charged
		require.Empty(t, b.claimQ(t, 10, &held, "r"))
		require.False(t, held.Waiting)
	}
	b.enqueueN(t, 3, jobs.EnqueueParams{Queue: "r"})
	require.Len(t, b.claimQ(t, 10, &held, "r"), 1, "the burst is one token")
	require.True(t, held.Waiting)
	require.Greater(t, held.RetryAfter, 19*time.Second)
	require.LessOrEqual(t, held.RetryAfter, 20*time.Second)
	require.Empty(t, b.claimQ(t, 10, nil, "r"))

	// 1000 per second: a burst of 200; 30 jobs take 30 tokens.
	b.setQueue(t, "r2", func(q domain.QueueSettings) domain.QueueSettings {
		q.RateLimit = &domain.RateLimit{Limit: 1000, PeriodSeconds: 1}
		return q
	})
	b.enqueueN(t, 30, jobs.EnqueueParams{Queue: "r2"})
	require.Len(t, b.claimQ(t, 100, &held, "r2"), 30)
	require.False(t, held.Waiting)
	b.enqueueN(t, 300, jobs.EnqueueParams{Queue: "r2"})
	got := b.claimQ(t, 300, nil, "r2")
	require.GreaterOrEqual(t, len(got), 170, "what the first claim left, plus what accrued")
	require.LessOrEqual(t, len(got), 200, "never more than the burst")
}

// TestClaimRotatesAcrossKeys: with per_key_concurrency, a claim takes the
// first job of every key before the second of any, no key exceeds its
// limit, priorities order jobs within a key, and the next claim starts
// after the last key served.
func TestClaimRotatesAcrossKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "f", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = intp(2); return q })
	b.enqueueN(t, 50, jobs.EnqueueParams{Queue: "f", ConcurrencyKey: "big", Priority: jobs.PriorityLow})
	b.enqueueN(t, 2, jobs.EnqueueParams{Queue: "f", ConcurrencyKey: "big", Priority: jobs.PriorityHigh})
	b.enqueueN(t, 3, jobs.EnqueueParams{Queue: "f", ConcurrencyKey: "small"})
	b.enqueueN(t, 1, jobs.EnqueueParams{Queue: "f"})

	got := b.claimQ(t, 3, nil, "f")
	require.Len(t, got, 3)
	for _, j := range got {
		if j.ConcurrencyKey != nil && *j.ConcurrencyKey == "big" {
			require.Equal(t, jobs.PriorityHigh, j.Priority, "priority orders jobs within a key")
		}
	}
	require.Equal(t, map[string]int{"-": 1, "big": 1, "small": 1}, keyCounts(got), "one job per key per round")

	got = b.claimQ(t, 100, nil, "f")
	require.Equal(t, map[string]int{"big": 1, "small": 1}, keyCounts(got), "each key is at its limit of 2 now")
	require.Empty(t, b.claimQ(t, 100, nil), "all keys are at their limit")
}

// TestClaimKeysAppearInAFairQueue: a fair queue holding only jobs without
// a key is claimed by the lean statement; when keyed jobs arrive, the
// next claim already rotates across keys and keeps each key to its limit
// (the lean claim never passes over them), and once the keys are gone
// the queue's remaining jobs are claimed as before. Both claimers share
// nothing but the database: one learns of the keys from the other's
// enqueue alone.
func TestClaimKeysAppearInAFairQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "f", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = intp(1); return q })
	b.enqueueN(t, 30, jobs.EnqueueParams{Queue: "f"})
	require.Len(t, b.claimQ(t, 10, nil), 10, "keyless jobs only: taken in claim order")
	require.Len(t, b.claimQ(t, 10, nil, "f"), 10)

	b.enqueueN(t, 5, jobs.EnqueueParams{Queue: "f", ConcurrencyKey: "a", Priority: jobs.PriorityHigh})
	b.enqueueN(t, 5, jobs.EnqueueParams{Queue: "f", ConcurrencyKey: "b", Priority: jobs.PriorityHigh})
	held := &domain.FlowHold{}
	got := b.claimQ(t, 20, held)
	require.Equal(t, map[string]int{"a": 1, "b": 1, "-": 10}, keyCounts(got), "one running per key, the keyless ones as before")
	require.True(t, held.Waiting, "keyed jobs wait for their keys")
	require.Empty(t, b.claimQ(t, 20, nil, "f"), "every key at its limit, no keyless job left")
}

// TestClaimFairnessManyKeys: a claim visits a bounded number of keys and
// the rotation reaches every key in turn, so a thousand keys are all
// served in a thousand jobs.
func TestClaimFairnessManyKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "m", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = intp(100); return q })
	var ps []jobs.EnqueueParams
	for k := range 1000 {
		for range 3 {
			ps = append(ps, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "m", ConcurrencyKey: fmt.Sprintf("k%04d", k)})
		}
	}
	_, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
	seen := map[string]bool{}
	for range 40 {
		for _, j := range b.claimQ(t, 25, nil, "m") {
			require.False(t, seen[*j.ConcurrencyKey], "key %s served twice before every key was served once", *j.ConcurrencyKey)
			seen[*j.ConcurrencyKey] = true
		}
	}
	require.Len(t, seen, 1000)
}

// TestExplainFlowControl: a queued job held back by its queue says why,
// from what the database holds: the pause, the queue's concurrency, its
// rate limit, its key's limit.
func TestExplainFlowControl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "xp", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "xp"})
	require.Contains(t, codes(b.explain(t, j.ID)), "queue_paused")

	b.setQueue(t, "xc", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = intp(1); return q })
	b.enqueueN(t, 2, jobs.EnqueueParams{Queue: "xc"})
	running := b.claimQ(t, 10, nil, "xc")
	require.Len(t, running, 1)
	waiting := b.enqueue(t, jobs.EnqueueParams{Queue: "xc"})
	r := reason(t, b.explain(t, waiting.ID), "concurrency_limit")
	require.Contains(t, r.Message, "1 of 1 jobs running")

	b.setQueue(t, "xr", func(q domain.QueueSettings) domain.QueueSettings {
		q.RateLimit = &domain.RateLimit{Limit: 1, PeriodSeconds: 3600}
		return q
	})
	b.enqueueN(t, 2, jobs.EnqueueParams{Queue: "xr"})
	require.Len(t, b.claimQ(t, 10, nil, "xr"), 1)
	late := b.enqueue(t, jobs.EnqueueParams{Queue: "xr"})
	r = reason(t, b.explain(t, late.ID), "rate_limit")
	require.NotNil(t, r.At)
	require.Contains(t, r.Message, "1 per 3600 s")

	b.setQueue(t, "xk", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = intp(1); return q })
	b.enqueueN(t, 1, jobs.EnqueueParams{Queue: "xk", ConcurrencyKey: "acme"})
	require.Len(t, b.claimQ(t, 10, nil, "xk"), 1)
	k := b.enqueue(t, jobs.EnqueueParams{Queue: "xk", ConcurrencyKey: "acme"})
	other := b.enqueue(t, jobs.EnqueueParams{Queue: "xk", ConcurrencyKey: "globex"})
	require.Contains(t, codes(b.explain(t, k.ID)), "key_limit")
	require.NotContains(t, codes(b.explain(t, other.ID)), "key_limit")
	require.NotContains(t, codes(b.explain(t, other.ID)), "queue_paused")
}

// TestClaimByIDLeavesConstrainedQueues: the Redis fast path's claim by id
// takes no job of a paused or limited queue (the ordinary claim, which
// enforces the limits, takes those), and takes the others.
func TestClaimByIDLeavesConstrainedQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "p", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	b.setQueue(t, "c", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = intp(5); return q })
	p := b.enqueue(t, jobs.EnqueueParams{Queue: "p"})
	c := b.enqueue(t, jobs.EnqueueParams{Queue: "c"})
	f := b.enqueue(t, jobs.EnqueueParams{Queue: "f"})
	got, err := b.store.ClaimJobsByID(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 3, LeaseTTL: time.Minute},
		[]uuid.UUID{p.ID, c.ID, f.ID})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, f.ID, got[0].ID)
	rest := b.claimQ(t, 10, nil)
	require.Len(t, rest, 1, "the limited queue's job, by the ordinary claim")
	require.Equal(t, c.ID, rest[0].ID)
}

// TestQueueCountsEveryState: the Queues listing counts each queue's jobs
// per state (live ones through their indexes, finished ones from the kept
// counts) exactly as grouping the table would, binned jobs left out.
func TestQueueCountsEveryState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	later := time.Now().Add(time.Hour)
	b.enqueueN(t, 7, jobs.EnqueueParams{Queue: "qa"})
	b.enqueueN(t, 3, jobs.EnqueueParams{Queue: "qb", RunAt: &later})
	b.enqueueN(t, 6, jobs.EnqueueParams{Queue: "qb"})
	running := b.claimQ(t, 5, nil, "qb")
	require.Len(t, running, 5)
	fs := []domain.Finish{
		{Lease: domain.LeaseOf(running[0]), Outcome: domain.OutcomeSucceeded},
		{Lease: domain.LeaseOf(running[1]), Outcome: domain.OutcomeSucceeded},
		{Lease: domain.LeaseOf(running[2]), Outcome: domain.OutcomeCancelled, Error: "stop"},
	}
	_, _, err := b.store.FinishJobs(b.ctx, fs)
	require.NoError(t, err)
	_, err = b.store.DeleteJob(b.ctx, running[0].ID) // a completed job, binned
	require.NoError(t, err)
	_, err = b.store.DeleteJob(b.ctx, running[4].ID) // running, binned (and asked to stop)
	require.NoError(t, err)

	want := map[string]map[jobs.State]int64{}
	rows, err := b.store.Pool().Query(b.ctx, `SELECT queue, status, count(*) FROM jobs WHERE deleted_at IS NULL GROUP BY 1, 2`)
	require.NoError(t, err)
	for rows.Next() {
		var q, st string
		var n int64
		require.NoError(t, rows.Scan(&q, &st, &n))
		if want[q] == nil {
			want[q] = map[jobs.State]int64{}
		}
		want[q][jobs.State(st)] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, int64(1), want["qb"][jobs.StateCompleted])
	require.Equal(t, int64(1), want["qb"][jobs.StateCancelled])
	require.Equal(t, int64(3), want["qb"][jobs.StateScheduled])

	qs, err := b.store.ListQueues(b.ctx)
	require.NoError(t, err)
	got := map[string]map[jobs.State]int64{}
	for _, q := range qs {
		got[q.Name] = map[jobs.State]int64{}
		for st, n := range q.Counts {
			if n != 0 {
				got[q.Name][st] = n
			}
		}
	}
	require.Equal(t, want, got)
	one, err := b.store.GetQueue(b.ctx, "qb")
	require.NoError(t, err)
	require.Equal(t, want["qb"], one.Counts)
}
