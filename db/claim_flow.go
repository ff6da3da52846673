package db

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/jobs"
)

// versionGuard makes a claim take nothing when the queue settings changed
// since its process loaded them ($4 is the version it loaded).
const versionGuard = ` AND EXISTS (SELECT 1 FROM flow_control_version WHERE version = $4)`

// versionGuard5 is versionGuard for statements whose fifth parameter is
// the version.
const versionGuard5 = ` AND EXISTS (SELECT 1 FROM flow_control_version WHERE version = $5)`

// queuedKeyed selects queued jobs that carry a concurrency key, in the
// words jobs_claim_key_idx's predicate uses.
const queuedKeyed = `status = 'queued' AND deleted_at IS NULL AND concurrency_key IS NOT NULL`

// claimFlowSQL is the claim when some of the queues it serves are paused or
// limited. It runs right after lockQueueSQL took the locks of the limited
// ones in the same transaction (one round trip: a pipeline), so its
// snapshot sees every claim that committed before it and none can commit
// meanwhile: counting running jobs is exact.
//
// Parameters: $1 worker, $2 limit, $3 lease ms, $4 settings version,
// $5 the queues served (NULL: all), $6 the constrained queues among them
// (paused or limited).
//
//   - plain: queues without settings, each from its own range of
//     jobs_claim_queue_idx. Serving all queues, it finds the queues that
//     have queued jobs with a skip scan of that index instead of walking
//     jobs_claim_idx, which would step over every job of a paused backlog.
//   - cq: each limited queue with its cap: its concurrency less the jobs
//     of the queue running (leases not yet reaped included), and no more
//     than the whole tokens in its bucket (refilled by the time elapsed,
//     capped at its burst).
//   - limited: queues with a cap but no per-key limit, in claim order.
//   - fair queues (per_key_concurrency): keyscan visits the keys that have
//     queued jobs, starting after the queue's key_cursor and wrapping
//     around (a skip scan of jobs_claim_key_idx, a bounded number of keys
//     per claim, however many keys exist); each key offers its next jobs
//     in claim order up to what its limit leaves, and candidates are taken
//     round by round: the first job of every key, then the second... Jobs
//     without a key are one more group, found among the first 2 × cap + 16
//     jobs of the queue's claim order (jobs_claim_key_idx leaves them out,
//     so that jobs without a key cost nothing more to enqueue anywhere):
//     in a fair queue, a job without a key waits its turn in plain claim
//     order.
//   - pick: one order for everything: the n-th candidate of each group
//     (plain and limited queues together are one group, in claim order;
//     each fair queue is another) before the n+1-th, ties broken at
//     random, cut to the limit.
//   - the bucket is charged one token per job picked, and the cursor moves
//     to the last key served.
const claimFlowSQL = `
WITH RECURSIVE
ok AS (SELECT 1 FROM flow_control_version WHERE version = $4),
plain_q AS (
	SELECT name FROM unnest($5::text[]) AS u(name), ok WHERE name <> ALL($6)
	UNION ALL
	SELECT name FROM (
		SELECT name FROM qscan WHERE $5::text[] IS NULL AND name IS NOT NULL
	) a, ok WHERE name <> ALL($6)
),
qscan(name) AS (
	(SELECT queue FROM jobs WHERE status = 'queued' AND deleted_at IS NULL AND $5::text[] IS NULL
	 ORDER BY queue LIMIT 1)
	UNION ALL
	SELECT (SELECT queue FROM jobs WHERE status = 'queued' AND deleted_at IS NULL AND queue > qscan.name
	        ORDER BY queue LIMIT 1)
	FROM qscan WHERE qscan.name IS NOT NULL
),
plain AS (
	SELECT c.id, c.queue, c.effective_priority, c.run_at, c.created_at, NULL::text AS key, 0 AS pos
	FROM plain_q CROSS JOIN LATERAL (
		SELECT id, queue, effective_priority, run_at, created_at FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND queue = plain_q.name
		ORDER BY effective_priority, run_at, created_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) c
),
cq0 AS MATERIALIZED (
	SELECT s.name, s.per_key_concurrency AS per_key, s.key_cursor, s.rate_limit,
	       CASE WHEN s.rate_limit IS NOT NULL THEN least(greatest(1, s.rate_limit / 5.0),
	            s.tokens + greatest(0, extract(epoch FROM now() - s.tokens_at)) * s.rate_limit / s.rate_period_seconds) END AS tokens,
	       CASE WHEN s.concurrency IS NOT NULL THEN s.concurrency - (
	            SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.queue = s.name) END AS free
	FROM queues s, ok
	WHERE s.name = ANY($6) AND NOT s.paused
	  AND (s.concurrency IS NOT NULL OR s.rate_limit IS NOT NULL OR s.per_key_concurrency IS NOT NULL)
),
cq AS MATERIALIZED (
	SELECT cq0.*, greatest(0, least($2, coalesce(free, $2), coalesce(floor(tokens)::int, $2)))::int AS cap FROM cq0
),
limited AS (
	SELECT c.id, cq.name AS queue, c.effective_priority, c.run_at, c.created_at, NULL::text AS key, 0 AS pos
	FROM cq CROSS JOIN LATERAL (
		SELECT id, effective_priority, run_at, created_at FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND queue = cq.name
		ORDER BY effective_priority, run_at, created_at, id
		LIMIT cq.cap
		FOR UPDATE SKIP LOCKED
	) c
	WHERE cq.per_key IS NULL AND cq.cap > 0
),
fq AS MATERIALIZED (
	SELECT name, per_key, coalesce(key_cursor, '') AS cursor, cap, least(2 * cap + 16, 2000) AS budget
	FROM cq WHERE per_key IS NOT NULL AND cap > 0
),
keyscan(queue, key, n, wrapped, cursor, budget) AS (
	SELECT fq.name, k.key, 1, k.wrapped, fq.cursor, fq.budget
	FROM fq CROSS JOIN LATERAL (
		SELECT * FROM (
			(SELECT concurrency_key AS key, false AS wrapped FROM jobs
			 WHERE ` + queuedKeyed + ` AND queue = fq.name AND concurrency_key > fq.cursor
			 ORDER BY concurrency_key LIMIT 1)
			UNION ALL
			(SELECT concurrency_key, true FROM jobs
			 WHERE ` + queuedKeyed + ` AND queue = fq.name AND concurrency_key <= fq.cursor
			 ORDER BY concurrency_key LIMIT 1)
		) first LIMIT 1
	) k
	UNION ALL
	SELECT ks.queue, nk.key, ks.n + 1, nk.wrapped, ks.cursor, ks.budget
	FROM keyscan ks CROSS JOIN LATERAL (
		SELECT * FROM (
			(SELECT concurrency_key AS key, ks.wrapped AS wrapped FROM jobs
			 WHERE ` + queuedKeyed + ` AND queue = ks.queue AND concurrency_key > ks.key
			   AND (NOT ks.wrapped OR concurrency_key <= ks.cursor)
			 ORDER BY concurrency_key LIMIT 1)
			UNION ALL
			(SELECT concurrency_key, true FROM jobs
			 WHERE ` + queuedKeyed + ` AND queue = ks.queue AND NOT ks.wrapped AND concurrency_key <= ks.cursor
			 ORDER BY concurrency_key LIMIT 1)
		) next LIMIT 1
	) nk
	WHERE ks.n < ks.budget
),
krun AS (
	SELECT r.queue, r.concurrency_key AS key, count(*) AS n FROM jobs r
	WHERE r.status = 'running' AND r.concurrency_key IS NOT NULL AND r.queue IN (SELECT name FROM fq)
	  AND EXISTS (SELECT 1 FROM keyscan) -- no keys waiting: nothing to count
	GROUP BY r.queue, r.concurrency_key
),
keyed AS (
	SELECT c.id, ks.queue, c.effective_priority, c.run_at, c.created_at, ks.key, ks.n AS pos
	FROM keyscan ks
	JOIN fq ON fq.name = ks.queue
	LEFT JOIN krun ON krun.queue = ks.queue AND krun.key = ks.key
	CROSS JOIN LATERAL (
		SELECT id, effective_priority, run_at, created_at FROM jobs
		WHERE ` + queuedKeyed + ` AND queue = ks.queue AND concurrency_key = ks.key
		ORDER BY effective_priority, run_at, created_at, id
		LIMIT greatest(0, least(fq.per_key - coalesce(krun.n, 0), fq.cap))
		FOR UPDATE SKIP LOCKED
	) c
),
keyless AS (
	SELECT c.id, fq.name AS queue, c.effective_priority, c.run_at, c.created_at, NULL::text AS key, 0 AS pos
	FROM fq CROSS JOIN LATERAL (
		SELECT id, effective_priority, run_at, created_at FROM jobs
		WHERE id = ANY (ARRAY(
			SELECT id FROM jobs
			WHERE status = 'queued' AND deleted_at IS NULL AND queue = fq.name
			ORDER BY effective_priority, run_at, created_at, id
			LIMIT 2 * fq.cap + 16))
		  AND concurrency_key IS NULL AND status = 'queued' AND deleted_at IS NULL
		ORDER BY effective_priority, run_at, created_at, id
		LIMIT fq.cap
		FOR UPDATE SKIP LOCKED
	) c
),
fair AS (
	SELECT f.*, row_number() OVER (PARTITION BY f.queue ORDER BY f.rnd, f.pos) AS seq FROM (
		SELECT u.*, row_number() OVER (PARTITION BY u.queue, u.key ORDER BY u.effective_priority, u.run_at, u.created_at, u.id) AS rnd
		FROM (SELECT * FROM keyed UNION ALL SELECT * FROM keyless) u
	) f
),
candidates AS (
	SELECT id, queue, key, pos, NULL::text AS grp,
	       row_number() OVER (ORDER BY effective_priority, run_at, created_at, id) AS seq
	FROM (SELECT * FROM plain UNION ALL SELECT * FROM limited) o
	UNION ALL
	SELECT fair.id, fair.queue, fair.key, fair.pos, fair.queue AS grp, fair.seq
	FROM fair JOIN fq ON fq.name = fair.queue WHERE fair.seq <= fq.cap
),
pick AS MATERIALIZED (
	SELECT id AS next_id, queue, key, pos FROM candidates ORDER BY seq, random() LIMIT $2
),
charged AS (
	UPDATE queues s SET
		tokens = CASE WHEN cq.rate_limit IS NOT NULL THEN cq.tokens - coalesce(p.n, 0) ELSE s.tokens END,
		tokens_at = CASE WHEN cq.rate_limit IS NOT NULL THEN now() ELSE s.tokens_at END,
		key_cursor = CASE WHEN cq.per_key IS NULL THEN s.key_cursor
		                  WHEN p.last_pos IS NOT NULL THEN (SELECT key FROM keyscan WHERE queue = cq.name AND n = p.last_pos)
		                  WHEN NOT EXISTS (SELECT 1 FROM candidates c WHERE c.queue = cq.name)
		                  THEN coalesce((SELECT key FROM keyscan WHERE queue = cq.name ORDER BY n DESC LIMIT 1), s.key_cursor)
		                  ELSE s.key_cursor END
	FROM cq LEFT JOIN (
		SELECT queue, count(*) AS n, max(pos) FILTER (WHERE pos > 0) AS last_pos FROM pick GROUP BY queue
	) p ON p.queue = cq.name
	WHERE s.name = cq.name AND (cq.rate_limit IS NOT NULL OR cq.per_key IS NOT NULL)
	RETURNING 1
),
next AS (SELECT next_id FROM pick)` + claimUpdate

// claimFlowLockSQL takes the locks of the limited queues (lockQueueSQL)
// and turns JIT compilation off for the transaction: the planner's
// estimate for the recursive scans of claimFlowSQL passes jit_above_cost,
// and compiling the statement took a hundred times longer than running it.
const claimFlowLockSQL = `SELECT set_config('jit', 'off', true),
	count(pg_advisory_xact_lock(7283948, hashtext(name))) FROM unnest($1::text[]) AS q(name)`

// flowHoldSQL runs after the claim, in the same transaction: the limited
// queues it served that still have queued jobs, with their buckets, so
// the pool knows whether and when to claim again.
const flowHoldSQL = `
SELECT s.rate_limit, s.rate_period_seconds, s.tokens, extract(epoch FROM now() - s.tokens_at)
FROM queues s
WHERE s.name = ANY($1) AND NOT s.paused
  AND EXISTS (SELECT 1 FROM jobs j WHERE j.status = 'queued' AND j.deleted_at IS NULL AND j.queue = s.name)`

// claimFlow claims through claimFlowSQL: one round trip carrying the
// locks, the claim and the hold query.
func (s *Store) claimFlow(ctx context.Context, p jobs.ClaimParams, st *flowState, constrained []string, ttl float64) ([]*jobs.Job, error) {
	var limited []string
	for _, q := range constrained {
		if qs := st.queues[q]; !qs.Paused && qs.Limited() {
			limited = append(limited, q)
		}
	}
	var queues []string
	if len(p.Queues) > 0 {
		queues = p.Queues
	}
	if limited == nil {
		limited = []string{}
	}
	b := &pgx.Batch{}
	b.Queue(claimFlowLockSQL, limited)
	var claimed []*jobs.Job
	b.Queue(claimFlowSQL, p.WorkerID, p.Limit, ttl, st.version, queues, constrained).Query(func(rows pgx.Rows) error {
		var err error
		claimed, err = collectJobs(rows, nil)
		return err
	})
	hold := jobs.FlowHold{}
	if len(limited) > 0 && p.Held != nil {
		b.Queue(flowHoldSQL, limited).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var rate, period *int32
				var tokens, elapsed float64
				if err := rows.Scan(&rate, &period, &tokens, &elapsed); err != nil {
					return err
				}
				hold.Waiting = true
				if rate == nil || period == nil {
					continue
				}
				rl := jobs.RateLimit{Limit: int(*rate), PeriodSeconds: int(*period)}
				now := min(rl.Burst(), tokens+max(0, elapsed)*float64(rl.Limit)/float64(rl.PeriodSeconds))
				if now < 1 {
					wait := time.Duration((1 - now) * float64(rl.Interval()))
					if hold.RetryAfter == 0 || wait < hold.RetryAfter {
						hold.RetryAfter = wait
					}
				}
			}
			return rows.Err()
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if p.Held != nil {
		*p.Held = hold
	}
	return claimed, nil
}

// claimIDsFlowSQL is claimIDsSQL with the flow-control guards: the ready
// queue's candidates never come from a paused or limited queue (those are
// claimed by claimFlowSQL), and a changed setting makes it take nothing.
const claimIDsFlowSQL = `
WITH next AS MATERIALIZED (
	SELECT id AS next_id FROM jobs
	WHERE id = ANY($5::uuid[]) AND status = 'queued' AND deleted_at IS NULL AND queue <> ALL($6::text[])` + versionGuard + `
	ORDER BY effective_priority, run_at, created_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)` + claimUpdate

// claimByIDFlow claims candidate ids outside the constrained queues.
func (s *Store) claimByIDFlow(ctx context.Context, p jobs.ClaimParams, ids []uuid.UUID, ttl float64) ([]*jobs.Job, error) {
	st, err := s.flowFor(ctx)
	if err != nil {
		return nil, err
	}
	constrained := st.constrained
	if constrained == nil {
		constrained = []string{}
	}
	return collectJobs(s.pool.Query(ctx, claimIDsFlowSQL, p.WorkerID, len(ids), ttl, st.version, uuidArray(ids), constrained))
}
