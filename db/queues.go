package db

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"flint/jobs"
)

// ChannelQueues carries a queue name whenever an operator changes a
// queue's settings (pause, resume, limits): every process reloads them.
const ChannelQueues = "flint_queues"

// flowReload is how old the loaded queue settings may grow before a claim
// reloads them, in case a notification was lost.
const flowReload = 5 * time.Second

// flowState is the queue settings one process has loaded, and the version
// of flow_control_version they belong to. Every claim sends the version:
// if an operator changed anything since, the claim takes nothing and the
// process reloads (the notification or the next reload does), so a stale
// copy can delay claims by moments but never break a limit or a pause.
type flowState struct {
	version  int64
	loadedAt time.Time
	queues   map[string]jobs.QueueSettings
	// constrained lists the paused or limited queues, sorted (the order in
	// which claims take their locks, so claimers never deadlock).
	constrained []string
}

// for returns the constrained queues a claim of queues (nil: all) serves.
func (f *flowState) constrainedFor(queues []string) []string {
	if len(queues) == 0 {
		return f.constrained
	}
	var out []string
	for _, q := range f.constrained {
		if slices.Contains(queues, q) {
			out = append(out, q)
		}
	}
	return out
}

const queueColumns = `name, paused, concurrency, rate_limit, rate_period_seconds, per_key_concurrency, updated_at, updated_by`

type queueRow struct {
	Name              string
	Paused            bool
	Concurrency       *int32
	RateLimit         *int32
	RatePeriod        *int32
	PerKeyConcurrency *int32
	UpdatedAt         time.Time
	UpdatedBy         string
}

func (r *queueRow) settings() jobs.QueueSettings {
	q := jobs.QueueSettings{Name: r.Name, Paused: r.Paused, UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy}
	if r.Concurrency != nil {
		n := int(*r.Concurrency)
		q.Concurrency = &n
	}
	if r.RateLimit != nil && r.RatePeriod != nil {
		q.RateLimit = &jobs.RateLimit{Limit: int(*r.RateLimit), PeriodSeconds: int(*r.RatePeriod)}
	}
	if r.PerKeyConcurrency != nil {
		n := int(*r.PerKeyConcurrency)
		q.PerKeyConcurrency = &n
	}
	return q
}

const loadFlowSQL = `
SELECT v.version, q.` + queueColumns + `
FROM flow_control_version v LEFT JOIN queues q ON true`

// ReloadQueueSettings reads every queue's settings and the version they
// belong to (one statement, one snapshot).
func (s *Store) ReloadQueueSettings(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, loadFlowSQL)
	if err != nil {
		return fmt.Errorf("load queue settings: %w", err)
	}
	defer rows.Close()
	st := &flowState{queues: map[string]jobs.QueueSettings{}, loadedAt: time.Now()}
	for rows.Next() {
		var r queueRow
		var name *string
		var paused *bool
		var at *time.Time
		var by *string
		if err := rows.Scan(&st.version, &name, &paused, &r.Concurrency, &r.RateLimit, &r.RatePeriod,
			&r.PerKeyConcurrency, &at, &by); err != nil {
			return fmt.Errorf("load queue settings: %w", err)
		}
		if name == nil {
			continue
		}
		r.Name, r.Paused, r.UpdatedAt, r.UpdatedBy = *name, *paused, *at, *by
		q := r.settings()
		st.queues[q.Name] = q
		if q.Constrained() {
			st.constrained = append(st.constrained, q.Name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load queue settings: %w", err)
	}
	sort.Strings(st.constrained)
	// Keep the newest: a slow reload must not replace a fresher one.
	for {
		cur := s.flow.Load()
		if cur != nil && cur.version > st.version {
			return nil
		}
		if s.flow.CompareAndSwap(cur, st) {
			return nil
		}
	}
}

// flowFor returns the loaded queue settings, loading them when there are
// none yet or they are older than flowReload.
func (s *Store) flowFor(ctx context.Context) (*flowState, error) {
	st := s.flow.Load()
	if st != nil && time.Since(st.loadedAt) < flowReload {
		return st, nil
	}
	if err := s.ReloadQueueSettings(ctx); err != nil {
		if st != nil {
			return st, nil // the version guard keeps a stale copy safe
		}
		return nil, err
	}
	return s.flow.Load(), nil
}

// QueuePaused reports whether queue was paused when the settings were last
// loaded; the pool ignores wake-ups for paused queues.
func (s *Store) QueuePaused(queue string) bool {
	st := s.flow.Load()
	if st == nil {
		return false
	}
	q, ok := st.queues[queue]
	return ok && q.Paused
}

// lockQueueSQL takes the advisory locks of queues, in the order given,
// until the transaction ends: claims of a limited queue and changes to its
// settings take turns. The key is (7283948, hashtext(name)); two names
// that hash alike share a lock, which only makes them take turns too.
const lockQueueSQL = `SELECT ` + queueLocks

// queueLocks is the select list and source taking the locks of the queues
// named in $1 (see lockQueueSQL); the claim's lock statements start with it
// too.
const queueLocks = `count(pg_advisory_xact_lock(7283948, hashtext(name))) FROM unnest($1::text[]) AS q(name)`

// upsertQueueSQL writes a queue's settings and bumps the version, and
// tells every process. A new or changed rate limit starts with a full
// bucket (its burst); an unchanged one keeps its tokens.
const upsertQueueSQL = `
WITH up AS (
	INSERT INTO queues (name, paused, concurrency, rate_limit, rate_period_seconds, per_key_concurrency,
	                    tokens, tokens_at, updated_at, updated_by)
	VALUES ($1, $2, $3, $4, $5, $6, greatest(1, coalesce($4, 0) / 5.0), now(), now(), $7)
	ON CONFLICT (name) DO UPDATE SET
		paused = excluded.paused, concurrency = excluded.concurrency,
		rate_limit = excluded.rate_limit, rate_period_seconds = excluded.rate_period_seconds,
		per_key_concurrency = excluded.per_key_concurrency,
		tokens = CASE WHEN queues.rate_limit IS NOT DISTINCT FROM excluded.rate_limit
		               AND queues.rate_period_seconds IS NOT DISTINCT FROM excluded.rate_period_seconds
		              THEN queues.tokens ELSE excluded.tokens END,
		tokens_at = CASE WHEN queues.rate_limit IS NOT DISTINCT FROM excluded.rate_limit
		                  AND queues.rate_period_seconds IS NOT DISTINCT FROM excluded.rate_period_seconds
		                 THEN queues.tokens_at ELSE excluded.tokens_at END,
		updated_at = now(), updated_by = excluded.updated_by
	RETURNING ` + queueColumns + `
),
bumped AS (UPDATE flow_control_version SET version = version + 1 RETURNING version),
notified AS (SELECT pg_notify('` + ChannelQueues + `', $1) AS n)
SELECT up.*, bumped.version FROM up, bumped, notified`

const getQueueRowSQL = `SELECT ` + queueColumns + ` FROM queues WHERE name = $1`

// UpdateQueue applies change to the settings of queue (creating its row on
// the first change) under the queue's lock, so it never races a claim, and
// returns the new settings. Every process learns of it at once
// (ChannelQueues), and claims made with the old settings after it commits
// take nothing (the version guard).
func (s *Store) UpdateQueue(ctx context.Context, queue, by string, change func(jobs.QueueSettings) jobs.QueueSettings) (jobs.QueueSettings, error) {
	var out jobs.QueueSettings
	var version int64
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockQueueSQL, []string{queue}); err != nil {
			return err
		}
		cur := jobs.QueueSettings{Name: queue}
		var r queueRow
		err := tx.QueryRow(ctx, getQueueRowSQL, queue).Scan(&r.Name, &r.Paused, &r.Concurrency, &r.RateLimit,
			&r.RatePeriod, &r.PerKeyConcurrency, &r.UpdatedAt, &r.UpdatedBy)
		switch {
		case err == nil:
			cur = r.settings()
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		next := change(cur)
		var conc, rate, period, perKey *int32
		if next.Concurrency != nil {
			conc = ptr(int32(*next.Concurrency))
		}
		if next.RateLimit != nil {
			rate, period = ptr(int32(next.RateLimit.Limit)), ptr(int32(next.RateLimit.PeriodSeconds))
		}
		if next.PerKeyConcurrency != nil {
			perKey = ptr(int32(*next.PerKeyConcurrency))
		}
		var w queueRow
		if err := tx.QueryRow(ctx, upsertQueueSQL, queue, next.Paused, conc, rate, period, perKey, by).Scan(
			&w.Name, &w.Paused, &w.Concurrency, &w.RateLimit, &w.RatePeriod, &w.PerKeyConcurrency,
			&w.UpdatedAt, &w.UpdatedBy, &version); err != nil {
			return err
		}
		out = w.settings()
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("update queue %s: %w", queue, err)
	}
	// This process knows at once; the others reload on the notification.
	_ = s.ReloadQueueSettings(ctx)
	return out, nil
}

func ptr[T any](v T) *T { return &v }

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
SELECT queue, 'scheduled', count(*), NULL FROM jobs
WHERE status = 'scheduled' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY queue
UNION ALL
SELECT queue, 'blocked', count(*), NULL FROM jobs
WHERE status = 'blocked' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*), NULL FROM jobs
WHERE status = 'running' AND deleted_at IS NULL AND ($1::text IS NULL OR queue = $1) GROUP BY queue
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
func (s *Store) ListQueues(ctx context.Context) ([]jobs.QueueInfo, error) {
	return s.queueInfos(ctx, nil)
}

// GetQueue returns one queue; a queue with neither jobs nor settings is
// jobs.ErrNotFound.
func (s *Store) GetQueue(ctx context.Context, name string) (jobs.QueueInfo, error) {
	out, err := s.queueInfos(ctx, &name)
	if err != nil {
		return jobs.QueueInfo{}, err
	}
	if len(out) == 0 {
		return jobs.QueueInfo{}, jobs.ErrNotFound
	}
	return out[0], nil
}

func (s *Store) queueInfos(ctx context.Context, only *string) ([]jobs.QueueInfo, error) {
	byName := map[string]*jobs.QueueInfo{}
	get := func(name string) *jobs.QueueInfo {
		qi, ok := byName[name]
		if !ok {
			qi = &jobs.QueueInfo{QueueSettings: jobs.QueueSettings{Name: name}, Counts: map[jobs.State]int64{},
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
			if err := rows.Scan(&q.Name, &q.Paused, &q.Concurrency, &q.RateLimit, &q.RatePeriod,
				&q.PerKeyConcurrency, &q.UpdatedAt, &q.UpdatedBy); err != nil {
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
	out := make([]jobs.QueueInfo, 0, len(byName))
	for _, qi := range byName {
		if qi.OldestQueuedAt != nil && now.After(*qi.OldestQueuedAt) {
			qi.OldestWaitSeconds = math.Round(now.Sub(*qi.OldestQueuedAt).Seconds()*10) / 10
		}
		out = append(out, *qi)
	}
	slices.SortFunc(out, func(a, b jobs.QueueInfo) int {
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
func (s *Store) queueFacts(ctx context.Context, j *jobs.Job) (*jobs.QueueFacts, error) {
	var r queueRow
	var running, keyRunning int
	var tokens *float64
	var now time.Time
	err := s.pool.QueryRow(ctx, queueFactsSQL, j.Queue, j.ConcurrencyKey).Scan(&r.Name, &r.Paused, &r.Concurrency,
		&r.RateLimit, &r.RatePeriod, &r.PerKeyConcurrency, &r.UpdatedAt, &r.UpdatedBy, &running, &tokens, &keyRunning, &now)
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
	f := &jobs.QueueFacts{Settings: st, Running: running, KeyRunning: keyRunning}
	if tokens != nil && st.RateLimit != nil {
		f.Tokens = *tokens
		if f.Tokens < 1 {
			at := now.Add(time.Duration((1 - f.Tokens) * float64(st.RateLimit.Interval())))
			f.NextTokenAt = &at
		}
	}
	return f, nil
}
