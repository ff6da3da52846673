package db

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// versionGuard makes a claim take nothing when the queue settings changed
// since its process loaded them ($4 is the version it loaded).
const versionGuard = ` AND EXISTS (SELECT 1 FROM flow_control_version WHERE version = $4)`

// versionGuard5 is versionGuard for statements whose fifth parameter is
// the version.
const versionGuard5 = ` AND EXISTS (SELECT 1 FROM flow_control_version WHERE version = $5)`

// pushSide keeps a flow-controlled claim to its side of the queues s:
// the pusher's claims ($8 true) take only from queues with a push URL,
// every other claim only from queues without one.
const pushSide = ` AND (s.push_url IS NOT NULL) = $8::boolean`

// queuedKeyed selects queued jobs that carry a concurrency key, in the
// words jobs_claim_key_idx's predicate uses.
const queuedKeyed = `status = 'queued' AND deleted_at IS NULL AND concurrency_key IS NOT NULL`

// flowServedSQL lists the served queues without settings, in plain_q:
// those named in $5, or, serving all queues ($5 NULL), those qscan finds
// with queued jobs (a skip scan of jobs_claim_queue_idx, which never
// steps over the jobs of a paused backlog). Only while ok holds a row.
// Each probe orders by the whole of that index's key, so that no other
// index can give its order: ordered by queue alone, a plan made while the
// table held a backlog probed jobs_queue_idx (queue, id), which also
// holds finished jobs, the oldest first, and every claim of a drain
// stepped over all the jobs finished so far (a limited drain ran at 0.6x
// of an unlimited one).
const flowServedSQL = `
plain_q AS (
	SELECT name FROM unnest($5::text[]) AS u(name), ok WHERE name <> ALL($6)
	UNION ALL
	SELECT name FROM (
		SELECT name FROM qscan WHERE $5::text[] IS NULL AND name IS NOT NULL
	) a, ok WHERE name <> ALL($6)
),
qscan(name) AS (
	(SELECT queue FROM jobs WHERE status = 'queued' AND deleted_at IS NULL AND $5::text[] IS NULL
	 ORDER BY queue, effective_priority, run_at, created_at, id LIMIT 1) -- jobs_claim_queue_idx's order
	UNION ALL
	SELECT (SELECT queue FROM jobs WHERE status = 'queued' AND deleted_at IS NULL AND queue > qscan.name
	        ORDER BY queue, effective_priority, run_at, created_at, id LIMIT 1)
	FROM qscan WHERE qscan.name IS NOT NULL
)`

// flowLimitedSQL says a queues row s has a limit.
const flowLimitedSQL = `(s.concurrency IS NOT NULL OR s.rate_limit IS NOT NULL OR s.per_key_concurrency IS NOT NULL)`

// flowBucketSQL reads a limited queue s: tokens, the whole and part
// tokens in its bucket now (refilled by the time elapsed, capped at its
// burst), and free, its concurrency less the jobs of the queue running
// (leases not yet reaped included). Each is NULL without its limit.
const flowBucketSQL = `
	       CASE WHEN s.rate_limit IS NOT NULL THEN least(greatest(1, s.rate_limit / 5.0),
	            s.tokens + greatest(0, extract(epoch FROM now() - s.tokens_at)) * s.rate_limit / s.rate_period_seconds) END AS tokens,
	       CASE WHEN s.concurrency IS NOT NULL THEN s.concurrency - (
	            SELECT count(*) FROM jobs r WHERE r.status = 'running' AND r.queue = s.name) END AS free`

// claimLimitedSQL is the flow-controlled claim when no served queue needs
// the rotation across keys: its limited queues have only a concurrency or
// a rate limit, or a per-key limit but no queued job that carries a key
// (then every job is in the one group of keyless jobs, taken in claim
// order). If a fair queue it serves has keyed jobs, it takes nothing
// (ok holds no row), so a claim comes back short and its caller asks
// flowHoldSQL, learns of the keys and claims through claimFlowSQL; a
// claim never passes over keyed jobs. Same parameters and guarantees as
// claimFlowSQL, at a fraction of its planning and execution: a claim from
// a limited queue is claimQueuesSQL with a cap.
const claimLimitedSQL = `
WITH RECURSIVE
ok AS (
	SELECT 1 FROM flow_control_version WHERE version = $4 AND NOT EXISTS (
		SELECT 1 FROM queues s CROSS JOIN LATERAL (
			SELECT 1 FROM jobs k WHERE ` + queuedKeyed + ` AND k.queue = s.name
			ORDER BY k.queue, k.concurrency_key LIMIT 1) k
		WHERE s.name = ANY($6) AND NOT s.paused AND s.per_key_concurrency IS NOT NULL` + pushSide + `)
),` + flowServedSQL + `,
cq AS MATERIALIZED (
	SELECT name, rate_limit, tokens,
	       greatest(0, least($2, coalesce(free, $2), coalesce(floor(tokens)::int, $2)))::int AS cap
	FROM (
		SELECT s.name, s.rate_limit,` + flowBucketSQL + `
		FROM queues s, ok
		WHERE s.name = ANY($6) AND NOT s.paused AND ` + flowLimitedSQL + pushSide + `
	) b
),
q AS (
	SELECT name, $2::int AS cap FROM plain_q
	UNION ALL
	SELECT name, cap FROM cq WHERE cap > 0
),
pick AS MATERIALIZED (
	SELECT c.id AS next_id, q.name AS queue
	FROM q CROSS JOIN LATERAL (
		SELECT id, effective_priority, run_at, created_at FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND queue = q.name` + typeFilter7 + `
		ORDER BY queue, effective_priority, run_at, created_at, id -- jobs_claim_queue_idx's order
		LIMIT q.cap
		FOR UPDATE SKIP LOCKED
	) c
	ORDER BY c.effective_priority, c.run_at, c.created_at, c.id
	LIMIT $2
),
charged AS (
	UPDATE queues s SET tokens = cq.tokens - coalesce(p.n, 0), tokens_at = now()
	FROM cq LEFT JOIN (SELECT queue, count(*) AS n FROM pick GROUP BY queue) p ON p.queue = cq.name
	WHERE s.name = cq.name AND cq.rate_limit IS NOT NULL
	RETURNING 1
),
next AS (SELECT next_id FROM pick)` + claimUpdateByArray

// claimFlowSQL is the claim when some of the queues it serves are paused or
// limited. It runs right after lockQueueSQL took the locks of the limited
// ones in the same transaction (one round trip: a pipeline), so its
// snapshot sees every claim that committed before it and none can commit
// meanwhile: counting running jobs is exact.
//
// Parameters: $1 worker, $2 limit, $3 lease ms, $4 settings version,
// $5 the queues served (NULL: all), $6 the constrained queues among them
// (paused or limited), $7 the job types served (NULL: all; see
// typeFilter5), $8 whether the claim is the pusher's (pushSide).
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
ok AS (SELECT 1 FROM flow_control_version WHERE version = $4),` + flowServedSQL + `,
plain AS (
	SELECT c.id, c.queue, c.effective_priority, c.run_at, c.created_at, NULL::text AS key, 0 AS pos
	FROM plain_q CROSS JOIN LATERAL (
		SELECT id, queue, effective_priority, run_at, created_at FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND queue = plain_q.name` + typeFilter7 + `
		ORDER BY effective_priority, run_at, created_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) c
),
cq0 AS MATERIALIZED (
	SELECT s.name, s.per_key_concurrency AS per_key, s.key_cursor, s.rate_limit,` + flowBucketSQL + `
	FROM queues s, ok
	WHERE s.name = ANY($6) AND NOT s.paused AND ` + flowLimitedSQL + pushSide + `
),
cq AS MATERIALIZED (
	SELECT cq0.*, greatest(0, least($2, coalesce(free, $2), coalesce(floor(tokens)::int, $2)))::int AS cap FROM cq0
),
limited AS (
	SELECT c.id, cq.name AS queue, c.effective_priority, c.run_at, c.created_at, NULL::text AS key, 0 AS pos
	FROM cq CROSS JOIN LATERAL (
		SELECT id, effective_priority, run_at, created_at FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND queue = cq.name` + typeFilter7 + `
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
		WHERE ` + queuedKeyed + ` AND queue = ks.queue AND concurrency_key = ks.key` + typeFilter7 + `
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
		  AND concurrency_key IS NULL AND status = 'queued' AND deleted_at IS NULL` + typeFilter7 + `
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
const claimFlowLockSQL = `SELECT set_config('jit', 'off', true), ` + queueLocks

// claimLimitedLockSQL is claimFlowLockSQL for claimLimitedSQL, which it
// also runs with a plan made once per connection and pinned to index
// paths. Planning claimLimitedSQL for every claim (PostgreSQL's custom
// plans) cost a millisecond, a quarter of the claim, and a plan made once
// (plan_cache_mode force_generic_plan) is only as good as the statistics
// of the moment it is made: made while the jobs table was empty, it read
// the table from end to end at every claim thereafter. With sequential
// and bitmap scans, sorts where an index gives the order, hash and merge
// joins and materialization all priced out, every table that statement
// reads has a single sensible path (each lateral scan is written so an
// index gives its order: see claimLimitedSQL), and the plan is the same
// whatever the statistics say. These settings last for the transaction,
// which ends with the claim.
const claimLimitedLockSQL = `SELECT ` + pinnedPlanSettings + `, ` + queueLocks

// pinnedPlanSettings are the settings, for the transaction, of a
// statement run with a plan made once per connection and pinned to index
// paths (see claimLimitedLockSQL): no JIT, the generic plan, and every
// path but index scans and nested loops priced out.
const pinnedPlanSettings = `set_config('jit', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true),
	set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('enable_sort', 'off', true), set_config('enable_hashjoin', 'off', true),
	set_config('enable_mergejoin', 'off', true), set_config('enable_material', 'off', true)`

// pinPlanSQL gives the statements after it in the same transaction (a
// pipeline) plans pinned to index paths (pinnedPlanSettings).
const pinPlanSQL = `SELECT ` + pinnedPlanSettings

// claimFlow claims from served queues some of which are paused or limited,
// in one round trip carrying the locks and the claim; a claim that came
// back short asks flowHoldSQL what held it back, in a second.
//
// The claim is claimLimitedSQL unless a fair queue among them had jobs
// with a key within the last keyedFor (s.keyed). When claimLimitedSQL took
// nothing because such jobs appeared, the claim goes on at once through
// claimFlowSQL.
func (s *Store) claimFlow(ctx context.Context, p domain.ClaimParams, st *flowState, constrained []string, ttl float64) ([]*jobs.Job, error) {
	var limited []string
	full := false
	for _, q := range constrained {
		if qs := st.queues[q]; !qs.Paused && qs.Limited() && (qs.Push != nil) == p.Push {
			limited = append(limited, q)
			full = full || (qs.PerKeyConcurrency != nil && s.keyedHint(q))
		}
	}
	if limited == nil {
		limited = []string{}
	}
	claimed, err := s.claimFlowOnce(ctx, p, st, constrained, limited, ttl, full)
	if err != nil || len(claimed) == p.Limit || len(limited) == 0 {
		return claimed, err
	}
	hold, keyed, err := s.flowHold(ctx, limited)
	if err != nil {
		return nil, err
	}
	if !full && keyed {
		rest := p
		rest.Limit = p.Limit - len(claimed)
		more, err := s.claimFlowOnce(ctx, rest, st, constrained, limited, ttl, true)
		if err != nil {
			return nil, err
		}
		claimed = append(claimed, more...)
		if len(claimed) < p.Limit {
			if hold, _, err = s.flowHold(ctx, limited); err != nil {
				return nil, err
			}
		}
	}
	if p.Held != nil {
		*p.Held = hold
	}
	return claimed, nil
}

// claimFlowOnce runs one flow-controlled claim, claimFlowSQL when full and
// claimLimitedSQL otherwise, after taking the locks of the limited queues
// in the same transaction.
func (s *Store) claimFlowOnce(ctx context.Context, p domain.ClaimParams, st *flowState, constrained, limited []string, ttl float64, full bool) ([]*jobs.Job, error) {
	var queues []string
	if len(p.Queues) > 0 {
		queues = p.Queues
	}
	lock, claim := claimLimitedLockSQL, claimLimitedSQL
	if full {
		lock, claim = claimFlowLockSQL, claimFlowSQL
	}
	b := &pgx.Batch{}
	b.Queue(lock, limited)
	return s.claimAfter(ctx, b, claimStatement(claim, p), p.WorkerID, p.Limit, ttl, st.version, queues, constrained, p.Types, p.Push)
}
