package db

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// queueCountsSQL counts the jobs of every queue per state (the bin left
// out), with the run time of each queue's longest-waiting queued job. The
// live states are counted through their partial indexes, one state per
// branch so each branch names its index's predicate; finished jobs, which
// pile up by the million, come from the counts job_counts keeps. Grouping
// the whole table took 1.8 s at ten million jobs.
const queueCountsSQL = `
SELECT queue, 'queued', count(*), min(run_at) FROM jobs
WHERE status = 'queued' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY queue
UNION ALL
SELECT queue, CASE WHEN attempt > 0 THEN 'retrying' ELSE 'scheduled' END, count(*), NULL FROM jobs
WHERE status = 'scheduled' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY 1, 2
UNION ALL
SELECT queue, 'blocked', count(*), NULL FROM jobs
WHERE status = 'blocked' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY queue
UNION ALL
SELECT queue, 'waiting', count(*), NULL FROM jobs
WHERE status = 'waiting' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY queue
UNION ALL
SELECT queue, CASE WHEN started_at IS NULL THEN 'claimed' ELSE 'running' END, count(*), NULL FROM jobs
WHERE status = 'running' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY 1, 2
UNION ALL
SELECT queue, status, sum(n)::bigint, NULL FROM job_counts
WHERE NOT in_bin AND ($1::text IS NULL OR queue = $1) GROUP BY queue, status HAVING sum(n) > 0`

// queueThroughputMinutes is the window of QueueInfo.Throughput.
const queueThroughputMinutes = 5

const queueThroughputSQL = `
SELECT queue, outcome, sum(n)::bigint FROM job_throughput
WHERE bucket > date_trunc('minute', now()) - $2 * interval '1 minute' AND ($1::text IS NULL OR queue = $1)
GROUP BY queue, outcome`

const allQueueRowsSQL = `SELECT ` + queueColumns + ` FROM queues WHERE ($1::text IS NULL OR name = $1)`

// ListQueues returns every queue that has live jobs or settings, by name.
func (s *Store) ListQueues(ctx context.Context) ([]domain.QueueInfo, error) {
	return s.queueInfos(ctx, nil)
}

// GetQueue returns one queue; a queue with neither jobs nor settings is
// domain.ErrNotFound.
func (s *Store) GetQueue(ctx context.Context, name string) (domain.QueueInfo, error) {
	out, err := s.queueInfos(ctx, &name)
	if err != nil {
		return domain.QueueInfo{}, err
	}
	if len(out) == 0 {
		return domain.QueueInfo{}, domain.ErrNotFound
	}
	return out[0], nil
}

func (s *Store) queueInfos(ctx context.Context, only *string) ([]domain.QueueInfo, error) {
	byName := map[string]*domain.QueueInfo{}
	get := func(name string) *domain.QueueInfo {
		qi, ok := byName[name]
		if !ok {
			qi = &domain.QueueInfo{QueueSettings: domain.QueueSettings{Name: name}, Counts: map[jobs.State]int64{},
				Throughput: map[string]int64{}, ThroughputMinutes: queueThroughputMinutes}
			byName[name] = qi
		}
		return qi
	}
	var now time.Time
	b := &pgx.Batch{}
	b.Queue(nowSQL).QueryRow(func(r pgx.Row) error { return r.Scan(&now) })
	b.Queue(allQueueRowsSQL, only).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var q queueRow
			if err := rows.Scan(q.fields()...); err != nil {
				return err
			}
			get(q.Name).QueueSettings = q.settings()
		}
		return rows.Err()
	})
	b.Queue(queueCountsSQL, only).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var name, status string
			var n int64
			var oldest *time.Time
			if err := rows.Scan(&name, &status, &n, &oldest); err != nil {
				return err
			}
			qi := get(name)
			qi.Counts[jobs.State(status)] = n
			if oldest != nil {
				qi.OldestQueuedAt = oldest
			}
		}
		return rows.Err()
	})
	b.Queue(queueThroughputSQL, only, queueThroughputMinutes).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var name, outcome string
			var n int64
			if err := rows.Scan(&name, &outcome, &n); err != nil {
				return err
			}
			if qi, ok := byName[name]; ok {
				qi.Throughput[outcome] += n
				qi.PerMinute += float64(n) / queueThroughputMinutes
			}
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	out := make([]domain.QueueInfo, 0, len(byName))
	for _, qi := range byName {
		if qi.OldestQueuedAt != nil && now.After(*qi.OldestQueuedAt) {
			qi.OldestWaitSeconds = math.Round(now.Sub(*qi.OldestQueuedAt).Seconds()*10) / 10
		}
		out = append(out, *qi)
	}
	slices.SortFunc(out, func(a, b domain.QueueInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

// queueFactsSQL reads what flow control says about a queue now: its
// settings, its running jobs, its bucket refilled to now, and the running
// jobs that share a concurrency key ($2; NULL for none).
const queueFactsSQL = `
SELECT ` + queueColumns + `,
       (SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.queue = s.name),
       CASE WHEN s.rate_limit IS NOT NULL THEN least(greatest(1, s.rate_limit / 5.0),
            s.tokens + greatest(0, extract(epoch FROM now() - s.tokens_at)) * s.rate_limit / s.rate_period_seconds) END,
       (SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.queue = s.name AND r.concurrency_key = $2),
       now()
FROM queues s WHERE s.name = $1`

// queueFacts reads the flow control of a queued job's queue, or nil when
// the queue is neither paused nor limited.
func (s *Store) queueFacts(ctx context.Context, j *jobs.Job) (*domain.QueueFacts, error) {
	var r queueRow
	var running, keyRunning int
	var tokens *float64
	var now time.Time
	err := s.pool.QueryRow(ctx, queueFactsSQL, j.Queue, j.ConcurrencyKey).Scan(append(r.fields(), &running, &tokens, &keyRunning, &now)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read queue %s: %w", j.Queue, err)
	}
	st := r.settings()
	if !st.Constrained() {
		return nil, nil
	}
	f := &domain.QueueFacts{Settings: st, Running: running, KeyRunning: keyRunning}
	if tokens != nil && st.RateLimit != nil {
		f.Tokens = *tokens
		if f.Tokens < 1 {
			at := now.Add(time.Duration((1 - f.Tokens) * float64(st.RateLimit.Interval())))
			f.NextTokenAt = &at
		}
	}
	return f, nil
}
