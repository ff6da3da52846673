package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The Redis ready queue: a sorted set of queued job ids scored like the
// claim order. Workers pop candidate ids from it and then claim those ids
// in PostgreSQL, which re-checks everything; an id that is stale (the job
// completed, was cancelled, never existed) simply claims nothing.

var queuedTimersSQL = timerPageSQL(jobs.StateQueued)

// RebuildReadyQueue adds every queued job to the ready queue. It removes
// nothing: stale members cost a wasted claim at worst. Safe to run from
// several processes at once.
func (s *Store) RebuildReadyQueue(ctx context.Context, r *Redis) (int, error) {
	after := uuid.Nil
	total := 0
	for {
		ts, err := collectTimers(s.pool.Query(ctx, queuedTimersSQL, after, 5000))
		if err != nil {
			return total, fmt.Errorf("rebuild ready queue: %w", err)
		}
		zs := make([]redis.Z, len(ts))
		for i, t := range ts {
			zs[i] = redis.Z{Score: readyScore(t.Priority, t.RunAt), Member: t.ID.String()}
			after = t.ID
		}
		if len(zs) > 0 {
			if err := r.client.ZAdd(ctx, r.readyKey(), zs...).Err(); err != nil {
				r.MarkDown(err)
				return total, fmt.Errorf("rebuild ready queue: %w", err)
			}
		}
		total += len(zs)
		if len(zs) < 5000 {
			return total, nil
		}
	}
}

// ReadyCandidates pops up to n ids from the ready queue, most urgent first.
// Popping is atomic, so two workers never get the same id from Redis; the
// claim in PostgreSQL is what makes a claim, though.
func (r *Redis) ReadyCandidates(ctx context.Context, n int) ([]uuid.UUID, error) {
	zs, err := r.client.ZPopMin(ctx, r.readyKey(), int64(n)).Result()
	if err != nil {
		r.MarkDown(err)
		return nil, err
	}
	out := make([]uuid.UUID, 0, len(zs))
	for _, z := range zs {
		if s, ok := z.Member.(string); ok {
			if id, err := uuid.Parse(s); err == nil {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

// ReadyLen returns the size of the ready queue.
func (r *Redis) ReadyLen(ctx context.Context) (int64, error) {
	return r.client.ZCard(ctx, r.readyKey()).Result()
}

// ClaimJobsByID claims those of ids that are still queued, outside paused
// and limited queues (claimIDsFlowSQL): the same guards as the ordinary
// claim, the same lease.
func (s *Store) ClaimJobsByID(ctx context.Context, p domain.ClaimParams, ids []uuid.UUID) ([]*jobs.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ttl := float64(p.LeaseTTL) / float64(time.Millisecond)
	claimed, err := s.claimByIDFlow(ctx, p, ids, ttl)
	return s.claimed(ctx, claimed, err)
}

// claimIDsFlowSQL is claimIDsSQL with the flow-control guards: the ready
// queue's candidates never come from a paused or limited queue (those are
// claimed by claimFlowSQL), and a changed setting makes it take nothing.
const claimIDsFlowSQL = `
WITH next AS MATERIALIZED (
	SELECT id AS next_id FROM jobs
	WHERE id = ANY($5::uuid[]) AND status = 'queued' AND deleted_at IS NULL AND queue <> ALL($6::text[])` + versionGuard + typeFilter7 + `
	ORDER BY effective_priority, run_at, created_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)` + claimUpdate

// claimByIDFlow claims candidate ids outside the constrained queues.
func (s *Store) claimByIDFlow(ctx context.Context, p domain.ClaimParams, ids []uuid.UUID, ttl float64) ([]*jobs.Job, error) {
	st, err := s.flowFor(ctx)
	if err != nil {
		return nil, err
	}
	constrained := st.constrained
	if constrained == nil {
		constrained = []string{}
	}
	return collectClaimed(s.pool.Query(ctx, claimStatement(claimIDsFlowSQL, p), p.WorkerID, len(ids), ttl, st.version, ids, constrained, p.Types))
}

// ReadyQueue is the Redis ready queue as the worker pool's fast path
// (workers.FastPath): candidate ids popped from Redis, then claimed in
// PostgreSQL under the ordinary claim's guards. The pool tries it first
// while Healthy and claims the rest with Store.ClaimJobs.
type ReadyQueue struct {
	store *Store
	redis *Redis
}

// NewReadyQueue returns the fast path of store over r, which must be the
// Redis the store announces to (Store.SetRedis).
func NewReadyQueue(store *Store, r *Redis) *ReadyQueue { return &ReadyQueue{store: store, redis: r} }

// Healthy reports whether Redis answered its last check; while it did
// not, the pool claims from PostgreSQL alone.
func (q *ReadyQueue) Healthy() bool { return q.redis.Healthy() }

// ReadyCandidates pops up to n candidate ids, most urgent first (see
// Redis.ReadyCandidates). A popped id is only a hint: pass it to
// ClaimJobsByID, which claims it only if it is still queued.
func (q *ReadyQueue) ReadyCandidates(ctx context.Context, n int) ([]uuid.UUID, error) {
	return q.redis.ReadyCandidates(ctx, n)
}

// ClaimJobsByID claims those of the candidates ids that are still queued
// (see Store.ClaimJobsByID); the others are dropped, as the ready queue
// already lost them.
func (q *ReadyQueue) ClaimJobsByID(ctx context.Context, p domain.ClaimParams, ids []uuid.UUID) ([]*jobs.Job, error) {
	return q.store.ClaimJobsByID(ctx, p, ids)
}
