package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"flint/jobs"
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
func (s *Store) ClaimJobsByID(ctx context.Context, p jobs.ClaimParams, ids []uuid.UUID) ([]*jobs.Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ttl := float64(p.LeaseTTL) / float64(time.Millisecond)
	claimed, err := s.claimByIDFlow(ctx, p, ids, ttl)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	s.emitJobs(claimed...)
	sortClaimed(claimed)
	return claimed, nil
}

// ReadyQueue is the Redis ready queue as the worker pool's fast path.
type ReadyQueue struct {
	store *Store
	redis *Redis
}

// NewReadyQueue returns the fast path over r.
func NewReadyQueue(store *Store, r *Redis) *ReadyQueue { return &ReadyQueue{store: store, redis: r} }

// Healthy reports whether Redis answers.
func (q *ReadyQueue) Healthy() bool { return q.redis.Healthy() }

// ReadyCandidates pops candidate ids.
func (q *ReadyQueue) ReadyCandidates(ctx context.Context, n int) ([]uuid.UUID, error) {
	return q.redis.ReadyCandidates(ctx, n)
}

// ClaimJobsByID claims the candidates still queued.
func (q *ReadyQueue) ClaimJobsByID(ctx context.Context, p jobs.ClaimParams, ids []uuid.UUID) ([]*jobs.Job, error) {
	return q.store.ClaimJobsByID(ctx, p, ids)
}
