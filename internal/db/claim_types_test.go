package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestClaimTakesOnlyServedTypes: a claim that names the types its worker
// serves takes no job of another type, through every claim statement
// (all queues, named queues, a limited queue, a fair queue with keys, and
// candidates by id), and takes the served ones behind them; a claim that
// names no types takes any.
func TestClaimTakesOnlyServedTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "limited", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = intp(100); return q })
	b.setQueue(t, "fair", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = intp(50); return q })
	served := []string{"thumbnail"}
	var ids []uuid.UUID
	for _, q := range []string{"default", "other", "limited", "fair"} {
		for _, typ := range []string{"pdf", "thumbnail"} {
			// The job of the type nobody here serves comes first in claim order.
			for i := range 3 {
				p := jobs.EnqueueParams{Type: typ, Queue: q}
				if q == "fair" {
					p.ConcurrencyKey = []string{"k1", "k2", "k3"}[i]
				}
				ids = append(ids, b.enqueue(t, p).ID)
			}
		}
	}
	claim := func(queues []string, types []string) []*jobs.Job {
		got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: queues, Types: types, Limit: 100, LeaseTTL: time.Minute})
		require.NoError(t, err)
		return got
	}
	typesOf := func(js []*jobs.Job) map[string]int {
		out := map[string]int{}
		for _, j := range js {
			out[j.Type+"@"+j.Queue]++
		}
		return out
	}
	require.Equal(t, map[string]int{"thumbnail@other": 3}, typesOf(claim([]string{"other"}, served)), "named queue")
	require.Equal(t, map[string]int{"thumbnail@limited": 3}, typesOf(claim([]string{"limited"}, served)), "limited queue")
	require.Equal(t, map[string]int{"thumbnail@fair": 3}, typesOf(claim([]string{"fair"}, served)), "fair queue with keys")
	require.Equal(t, map[string]int{"thumbnail@default": 3}, typesOf(claim(nil, served)), "every queue")

	byID, err := b.store.ClaimJobsByID(b.ctx, domain.ClaimParams{WorkerID: "w", Types: []string{"nothing-here"}, LeaseTTL: time.Minute}, ids)
	require.NoError(t, err)
	require.Empty(t, byID, "candidates by id of types not served")

	rest := typesOf(claim(nil, nil))
	require.Equal(t, map[string]int{"pdf@default": 3, "pdf@other": 3, "pdf@limited": 3, "pdf@fair": 3}, rest, "no types named: any type")
}

// Types no worker has served within the window are forgotten by the
// pruner, not only ignored, so a key that once announced thousands of
// types leaves nothing behind a day later.
func TestPruneForgetsTypesNobodyServes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.Pool().Exec(b.ctx, `INSERT INTO job_types_served (type, last_seen_at, worker_id)
		VALUES ('fresh', now(), 'w1'), ('stale', now() - interval '25 hours', 'w2')`)
	require.NoError(t, err)
	_, err = b.store.Prune(b.ctx, domain.DefaultSettings(), nil, 100)
	require.NoError(t, err)
	var left []string
	rows, err := b.store.Pool().Query(b.ctx, `SELECT type FROM job_types_served ORDER BY type`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"fresh"}, left)
}
