package db

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"flint/jobs"
)

// The worker registry is for display: who is running, with which queues
// and jobs. It lives in Redis (heartbeat keys with a TTL) and, always, in
// the workers table, which serves when Redis is away. Lease expiry alone
// decides whether a job's worker is alive, so flushing Redis can never make
// a healthy job look abandoned.

// SetRedis gives the store the Redis fast path (nil: PostgreSQL only).
func (s *Store) SetRedis(r *Redis) { s.redis = r }

const upsertWorkerSQL = `
INSERT INTO workers (id, host, pid, queues, types, concurrency, version, started_at, heartbeat_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now())
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), queues = excluded.queues, types = excluded.types,
	concurrency = excluded.concurrency`

// RegisterWorker records (or refreshes) a worker's heartbeat, valid for ttl.
func (s *Store) RegisterWorker(ctx context.Context, w jobs.WorkerInfo, ttl time.Duration) error {
	if w.Queues == nil {
		w.Queues = []string{}
	}
	if w.Types == nil {
		w.Types = []string{}
	}
	if _, err := s.pool.Exec(ctx, upsertWorkerSQL, w.ID, w.Host, w.PID, w.Queues, w.Types, w.Concurrency, w.Version, w.StartedAt); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	if s.redis.Healthy() {
		info, _ := json.Marshal(w)
		pipe := s.redis.client.Pipeline()
		pipe.Set(ctx, s.redis.workerKey(w.ID), info, ttl)
		pipe.ZAdd(ctx, s.redis.workersKey(), redis.Z{Score: float64(time.Now().Add(ttl).UnixMilli()), Member: w.ID})
		pipe.ZRemRangeByScore(ctx, s.redis.workersKey(), "-inf", strconv.FormatInt(time.Now().UnixMilli(), 10))
		if _, err := pipe.Exec(ctx); err != nil {
			s.redis.MarkDown(err)
		}
	}
	return nil
}

const deleteWorkerSQL = `DELETE FROM workers WHERE id = $1`

// DeregisterWorker removes a worker that is shutting down.
func (s *Store) DeregisterWorker(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, deleteWorkerSQL, id); err != nil {
		return fmt.Errorf("deregister worker: %w", err)
	}
	if s.redis.Healthy() {
		pipe := s.redis.client.Pipeline()
		pipe.Del(ctx, s.redis.workerKey(id))
		pipe.ZRem(ctx, s.redis.workersKey(), id)
		if _, err := pipe.Exec(ctx); err != nil {
			s.redis.MarkDown(err)
		}
	}
	return nil
}

const liveWorkersSQL = `
SELECT id, host, pid, queues, types, concurrency, version, started_at, heartbeat_at FROM workers
WHERE heartbeat_at > now() - $1 * interval '1 millisecond'
ORDER BY started_at, id`

// workerRow is a workers row.
type workerRow struct {
	ID          string    `db:"id"`
	Host        string    `db:"host"`
	PID         int       `db:"pid"`
	Queues      textArray `db:"queues"`
	Types       textArray `db:"types"`
	Concurrency int       `db:"concurrency"`
	Version     string    `db:"version"`
	StartedAt   time.Time `db:"started_at"`
	HeartbeatAt time.Time `db:"heartbeat_at"`
}

const runningJobsSQL = `
SELECT worker_id, id, type, started_at FROM jobs
WHERE status = 'running' AND worker_id = ANY($1::text[])
ORDER BY started_at`

// runningJobRow is a job a worker is running.
type runningJobRow struct {
	WorkerID  string     `db:"worker_id"`
	ID        uuid.UUID  `db:"id"`
	Type      string     `db:"type"`
	StartedAt *time.Time `db:"started_at"`
}

// ListWorkers returns the live workers (heartbeat within ttl) with the jobs
// each is running, from Redis when it is up and from PostgreSQL otherwise.
func (s *Store) ListWorkers(ctx context.Context, ttl time.Duration) ([]jobs.WorkerInfo, error) {
	var out []jobs.WorkerInfo
	fromRedis := false
	if s.redis.Healthy() {
		if ws, err := s.workersFromRedis(ctx); err == nil {
			out, fromRedis = ws, true
		} else {
			s.redis.MarkDown(err)
		}
	}
	if !fromRedis {
		var rows []workerRow
		if err := s.sqlx.SelectContext(ctx, &rows, liveWorkersSQL, float64(ttl)/float64(time.Millisecond)); err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		for _, r := range rows {
			out = append(out, jobs.WorkerInfo{ID: r.ID, Host: r.Host, PID: r.PID, Queues: r.Queues, Types: r.Types, Concurrency: r.Concurrency,
				Version: r.Version, StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt})
		}
	}
	if len(out) == 0 {
		return []jobs.WorkerInfo{}, nil
	}
	ids := make([]string, len(out))
	index := map[string]int{}
	for i, w := range out {
		ids[i] = w.ID
		index[w.ID] = i
		out[i].Running = []jobs.RunningJob{}
	}
	var running []runningJobRow
	if err := s.sqlx.SelectContext(ctx, &running, runningJobsSQL, ids); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	for _, r := range running {
		rj := jobs.RunningJob{ID: r.ID, Type: r.Type}
		if r.StartedAt != nil {
			rj.StartedAt = *r.StartedAt
		}
		if i, ok := index[r.WorkerID]; ok {
			out[i].Running = append(out[i].Running, rj)
		}
	}
	return out, nil
}

func (s *Store) workersFromRedis(ctx context.Context) ([]jobs.WorkerInfo, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	ids, err := s.redis.client.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.redis.workersKey(), Start: now, Stop: "+inf", ByScore: true}).Result()
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.redis.workerKey(id)
	}
	vals, err := s.redis.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	var out []jobs.WorkerInfo
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // expired between the two reads
		}
		var w jobs.WorkerInfo
		if json.Unmarshal([]byte(str), &w) == nil {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b jobs.WorkerInfo) int { return a.StartedAt.Compare(b.StartedAt) })
	return out, nil
}
