package db

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/flinthq/flint/internal/domain"
)

// The worker registry is for display: who is running, with which queues
// and jobs. It lives in Redis (heartbeat keys with a TTL) and, always, in
// the workers table, which serves when Redis is away. Lease expiry alone
// decides whether a job's worker is alive, so flushing Redis can never make
// a healthy job look abandoned.

// SetRedis gives the store the Redis fast path (nil: PostgreSQL only).
func (s *Store) SetRedis(r *Redis) { s.redis = r }

// upsertWorkerSQL records a worker's heartbeat and the types it serves
// (job_types_served, refreshed at most once a minute a type, so that
// heartbeats of many workers do not rewrite the same rows), and returns
// what an operator asked of it.
const upsertWorkerSQL = `
WITH w AS (
	INSERT INTO workers (id, host, pid, queues, types, concurrency, version, started_at, heartbeat_at, kind, name, language, key_id, roles)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), $9, $10, $11, $12, $13)
	ON CONFLICT (id) DO UPDATE SET heartbeat_at = now(), queues = excluded.queues, types = excluded.types,
		concurrency = excluded.concurrency
	RETURNING requested_state
),
served AS (
	INSERT INTO job_types_served (type, last_seen_at, worker_id)
	SELECT t, now(), $1 FROM unnest($5::text[]) AS t
	ON CONFLICT (type) DO UPDATE SET last_seen_at = now(), worker_id = excluded.worker_id
	WHERE job_types_served.last_seen_at < now() - interval '1 minute'
)
SELECT requested_state FROM w`

// RegisterWorker records (or refreshes) a worker's heartbeat, valid for
// ttl.
func (s *Store) RegisterWorker(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) error {
	_, err := s.WorkerHeartbeat(ctx, w, ttl)
	return err
}

// WorkerHeartbeat is RegisterWorker returning the state an operator asked
// of the worker (domain.WorkerRunning, WorkerQuiet or WorkerTerminate).
func (s *Store) WorkerHeartbeat(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) (string, error) {
	if w.Queues == nil {
		w.Queues = []string{}
	}
	if w.Types == nil {
		w.Types = []string{}
	}
	if w.Roles == nil {
		w.Roles = []string{}
	}
	w.Kind = cmp.Or(w.Kind, domain.WorkerProcess)
	if w.Language == "" && w.Kind == domain.WorkerProcess {
		w.Language = "go"
	}
	var state string
	if err := s.pool.QueryRow(ctx, upsertWorkerSQL, w.ID, w.Host, w.PID, w.Queues, w.Types, w.Concurrency, w.Version, w.StartedAt,
		w.Kind, w.Name, w.Language, w.KeyID, w.Roles).Scan(&state); err != nil {
		return "", fmt.Errorf("register worker: %w", err)
	}
	w.State = state
	s.publishWorker(ctx, w, ttl)
	return state, nil
}

// publishWorker puts a worker's registry entry in Redis (valid for ttl),
// when Redis is up, and forgets the entries that have expired.
func (s *Store) publishWorker(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) {
	if !s.redis.Healthy() {
		return
	}
	info, _ := json.Marshal(w)
	pipe := s.redis.client.Pipeline()
	pipe.Set(ctx, s.redis.workerKey(w.ID), info, ttl)
	pipe.ZAdd(ctx, s.redis.workersKey(), redis.Z{Score: float64(time.Now().Add(ttl).UnixMilli()), Member: w.ID})
	pipe.ZRemRangeByScore(ctx, s.redis.workersKey(), "-inf", strconv.FormatInt(time.Now().UnixMilli(), 10))
	if _, err := pipe.Exec(ctx); err != nil {
		s.redis.MarkDown(err)
	}
}

const servedTypesSQL = `SELECT type FROM job_types_served WHERE last_seen_at > now() - $1 * interval '1 millisecond'`

// ServedTypes returns the job types a worker has said it serves within
// the last domain.ServedTypesWindow.
func (s *Store) ServedTypes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, servedTypesSQL, float64(domain.ServedTypesWindow)/float64(time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("served types: %w", err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("served types: %w", err)
	}
	return types, nil
}

const deleteWorkerSQL = `DELETE FROM workers WHERE id = $1`

// DeregisterWorker removes a worker that is shutting down from the
// registry, in PostgreSQL and, when it is up, in Redis. A Redis failure is
// not an error: the worker's entry there expires on its own.
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
SELECT id, host, pid, queues, types, concurrency, version, started_at, heartbeat_at, kind, name, language, key_id, requested_state, roles
FROM workers
WHERE heartbeat_at > now() - $1 * interval '1 millisecond'
ORDER BY started_at, id`

// workerRow is a workers row.
type workerRow struct {
	ID          string     `db:"id"`
	Host        string     `db:"host"`
	PID         int        `db:"pid"`
	Queues      textArray  `db:"queues"`
	Types       textArray  `db:"types"`
	Concurrency int        `db:"concurrency"`
	Version     string     `db:"version"`
	StartedAt   time.Time  `db:"started_at"`
	HeartbeatAt time.Time  `db:"heartbeat_at"`
	Kind        string     `db:"kind"`
	Name        string     `db:"name"`
	Language    string     `db:"language"`
	KeyID       *uuid.UUID `db:"key_id"`
	State       string     `db:"requested_state"`
	Roles       textArray  `db:"roles"`
}

func (r workerRow) info() domain.WorkerInfo {
	return domain.WorkerInfo{ID: r.ID, Kind: r.Kind, Name: r.Name, Language: r.Language, Host: r.Host, PID: r.PID,
		Queues: r.Queues, Types: r.Types, Concurrency: r.Concurrency, Version: r.Version, StartedAt: r.StartedAt,
		HeartbeatAt: r.HeartbeatAt, State: r.State, KeyID: r.KeyID, Roles: r.Roles}
}

// runningJobsSQL reads the jobs the workers hold: running, or claimed
// (no started_at yet) and waiting in their buffers.
const runningJobsSQL = `
SELECT worker_id, id, type, started_at FROM jobs
WHERE status = 'running' AND worker_id = ANY($1::text[])
ORDER BY started_at NULLS LAST`

// runningJobRow is a job a worker holds (StartedAt nil: claimed).
type runningJobRow struct {
	WorkerID  string     `db:"worker_id"`
	ID        uuid.UUID  `db:"id"`
	Type      string     `db:"type"`
	StartedAt *time.Time `db:"started_at"`
}

// ListWorkers returns the live workers (heartbeat within ttl) with the jobs
// each is running, from Redis when it is up and from PostgreSQL otherwise.
func (s *Store) ListWorkers(ctx context.Context, ttl time.Duration) ([]domain.WorkerInfo, error) {
	var out []domain.WorkerInfo
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
			out = append(out, r.info())
		}
	}
	if len(out) == 0 {
		return []domain.WorkerInfo{}, nil
	}
	ids := make([]string, len(out))
	index := map[string]int{}
	for i, w := range out {
		ids[i] = w.ID
		index[w.ID] = i
		out[i].Running = []domain.RunningJob{}
	}
	var running []runningJobRow
	if err := s.sqlx.SelectContext(ctx, &running, runningJobsSQL, ids); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	for _, r := range running {
		i, ok := index[r.WorkerID]
		switch {
		case !ok:
		case r.StartedAt == nil:
			out[i].Claimed++
		default:
			out[i].Running = append(out[i].Running, domain.RunningJob{ID: r.ID, Type: r.Type, StartedAt: *r.StartedAt})
		}
	}
	return out, nil
}

func (s *Store) workersFromRedis(ctx context.Context) ([]domain.WorkerInfo, error) {
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
	var out []domain.WorkerInfo
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // expired between the two reads
		}
		var w domain.WorkerInfo
		if json.Unmarshal([]byte(str), &w) == nil {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b domain.WorkerInfo) int { return a.StartedAt.Compare(b.StartedAt) })
	return out, nil
}

// pruneServedTypesSQL forgets the job types no worker has served within
// $1 milliseconds (domain.ServedTypesWindow): the API stopped accepting them
// then, and their rows would otherwise pile up with every worker that
// ever announced a type.
const pruneServedTypesSQL = `DELETE FROM job_types_served WHERE last_seen_at < now() - $1 * interval '1 millisecond'`

// pruneServedTypes deletes the served types past the window (Prune's).
func (s *Store) pruneServedTypes(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, pruneServedTypesSQL, domain.ServedTypesWindow.Milliseconds()); err != nil {
		return fmt.Errorf("prune served types: %w", err)
	}
	return nil
}
