package db

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// claimUpdate leases the rows chosen by the "next" CTE. Each claim charges
// an attempt, counts an execution and mints a fresh lease token that fences
// every later write for this attempt.
const claimUpdate = claimLease + `
FROM next
WHERE j.id = next.next_id
RETURNING ` + claimedColumns

// claimUpdateByArray is claimUpdate reaching the rows through the primary
// key whatever a plan estimates of how many there are: a join with next,
// planned without knowing its size, may read the whole table.
const claimUpdateByArray = claimLease + `
WHERE j.id = ANY (ARRAY(SELECT next_id FROM next))
RETURNING ` + claimedColumns

const claimLease = `
UPDATE jobs j SET
	status = 'running',
	attempt = j.attempt + 1,
	executions = j.executions + 1,
	lease_token = gen_random_uuid(),
	lease_expires_at = now() + $3 * interval '1 millisecond',
	worker_id = $1,
	started_at = now(),
	updated_at = now(),
	progress = NULL,
	progress_message = NULL`

// claimStarts is how claimLease sets started_at for a claim whose jobs
// start at once; claimWaits is what a buffered claim sets instead (see
// claimStatement).
const (
	claimStarts = "\tstarted_at = now(),\n"
	claimWaits  = "\tstarted_at = NULL,\n"
)

// claimVariants caches each claim statement's variants: buffered (key
// "b" + sql) and immediate ("i" + sql).
var claimVariants sync.Map // string → string

// queuedRows is how every claim statement picks its candidate rows, and
// dueRows the same for a claim whose jobs start at once.
const (
	queuedRows = "status = 'queued' AND deleted_at IS NULL"
	dueRows    = "status = 'queued' AND run_at <= now() AND deleted_at IS NULL"
)

// claimStatement is the claim statement sql as a claim of p runs it. A
// buffered claim (domain.ClaimParams.Buffered) leaves started_at NULL: its
// jobs are claimed, not running, until the pool reports that their
// handlers started (StartJobs, or with their outcomes). The claim's time
// is the updated_at it returns, which the pool counts the start from.
// It may take queued jobs whose run_at is still ahead (the promoter
// queues jobs shortly before their time: scheduler.DefaultPromoteAhead);
// the pool starts them at run_at. A claim whose jobs start at once (pull
// workers, push) takes only jobs that are due.
func claimStatement(sql string, p domain.ClaimParams) string {
	key := "i" + sql
	if p.Buffered {
		key = "b" + sql
	}
	if v, ok := claimVariants.Load(key); ok {
		return v.(string)
	}
	var out string
	if p.Buffered {
		out = strings.Replace(sql, claimStarts, claimWaits, 1)
	} else {
		out = strings.ReplaceAll(sql, queuedRows, dueRows)
	}
	claimVariants.Store(key, out)
	return out
}

// claimSQL takes the next due jobs in claim order and leases them in one
// statement. SKIP LOCKED lets concurrent claimers pass over each other's rows
// instead of waiting, and the MATERIALIZED CTE makes PostgreSQL lock exactly
// the rows it selected.
//
// It serves only when no queue is paused or limited ($4 is the version of
// the queue settings that said so: see versionGuard).
const claimSQL = `
WITH next AS MATERIALIZED (
	SELECT id AS next_id FROM jobs
	WHERE status = 'queued' AND deleted_at IS NULL` + versionGuard + typeFilter5 + `
	ORDER BY effective_priority, run_at, created_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)` + claimUpdateByArray

// typeFilter5 limits a claim to the job types its worker serves, the
// fifth parameter (NULL: any type). A worker never takes a job it has no
// handler for: a stock process beside a program with types of its own, or
// a remote worker that serves a few types, leaves the others to whoever
// serves them. The filter is checked on the rows the claim order reaches,
// so jobs of types nobody here serves cost a look each while they wait
// ahead of served ones (explain names them: no live worker serves the
// type).
const typeFilter5 = ` AND ($5::text[] IS NULL OR type = ANY($5::text[]))`

// typeFilter6 and typeFilter7 are typeFilter5 for statements whose sixth
// and seventh parameters are the types.
const (
	typeFilter6 = ` AND ($6::text[] IS NULL OR type = ANY($6::text[]))`
	typeFilter7 = ` AND ($7::text[] IS NULL OR type = ANY($7::text[]))`
)

// claimQueuesSQL is claimSQL limited to some queues. Each queue's next jobs
// come from its own ordered range of the per-queue index, and the merged
// candidates are cut to the limit: with queue = ANY(...) the planner could
// only walk the all-queues index and filter, which at a million rows costs
// tens of milliseconds when the wanted queue is not at the front. Rows
// locked but not kept are released when the statement's transaction ends.
// It serves only queues that are neither paused nor limited.
const claimQueuesSQL = `
WITH next AS MATERIALIZED (
	SELECT c.id AS next_id
	FROM unnest($4::text[]) AS q(name)
	CROSS JOIN LATERAL (
		SELECT id, effective_priority, run_at, created_at FROM jobs
		WHERE status = 'queued' AND deleted_at IS NULL AND queue = q.name` + versionGuard5 + typeFilter6 + `
		ORDER BY effective_priority, run_at, created_at, id
		LIMIT $2
		FOR UPDATE SKIP LOCKED
	) c
	ORDER BY c.effective_priority, c.run_at, c.created_at, c.id
	LIMIT $2
)` + claimUpdateByArray

// ClaimJobs leases up to p.Limit queued jobs for p.WorkerID and returns them
// in claim order (effective_priority, run_at, created_at, id).
//
// When none of the queues it serves is paused or limited (the queue
// settings this process loaded say so), the claim is the plain statement.
// Otherwise it goes through claimFlow, which enforces the limits in the
// database (see claimFlowSQL) and returns its jobs with the flow-controlled
// ones in rotation order.
func (s *Store) ClaimJobs(ctx context.Context, p domain.ClaimParams) ([]*jobs.Job, error) {
	if p.Held != nil {
		*p.Held = domain.FlowHold{}
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	ttl := float64(p.LeaseTTL) / float64(time.Millisecond)
	st, err := s.flowFor(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	var claimed []*jobs.Job
	if p.Push && len(p.Queues) == 0 {
		return nil, nil // the pusher names the queues it pushes
	}
	switch constrained := st.constrainedFor(p.Queues, p.Push); {
	case len(constrained) > 0:
		claimed, err = s.claimFlow(ctx, p, st, constrained, ttl)
	case len(p.Queues) == 0:
		claimed, err = s.claimPinned(ctx, claimStatement(claimSQL, p), p.WorkerID, p.Limit, ttl, st.version, p.Types)
	default:
		claimed, err = s.claimPinned(ctx, claimStatement(claimQueuesSQL, p), p.WorkerID, p.Limit, ttl, p.Queues, st.version, p.Types)
	}
	return s.claimed(ctx, claimed, err)
}

// claimed finishes a claim that took jobs (or failed with err): it reads
// the parents' results of those that have parents, announces the claim
// and puts the jobs in claim order. A claim whose parents could not be
// read returns the error; its leases run out as those of a claim whose
// answer was lost do, and the jobs are claimed again.
func (s *Store) claimed(ctx context.Context, claimed []*jobs.Job, err error) ([]*jobs.Job, error) {
	if err == nil {
		err = s.readParents(ctx, claimed)
	}
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	s.emitJobs(claimed...)
	sortClaimed(claimed)
	return claimed, nil
}

// claimPinned runs a plain claim (claimSQL, claimQueuesSQL) with a plan
// made once per connection and pinned to index paths (pinPlanSQL), in one
// round trip. With its parents', steps' and signals' subqueries it is a
// large statement (planning 1.3 ms against 2.4 ms to run a claim of 50),
// and PostgreSQL's plan cache kept planning it afresh at about half its
// calls while jobs resumed a few at a time. Pinned, the plan is the one
// the statistics would give a backlog (each queue's range of the claim
// index in claim order, then the rows by key) whatever they say, so a
// burst into a table nothing has analyzed yet is claimed the same way.
func (s *Store) claimPinned(ctx context.Context, sql string, args ...any) ([]*jobs.Job, error) {
	b := &pgx.Batch{}
	b.Queue(pinPlanSQL)
	return s.claimAfter(ctx, b, sql, args...)
}

// claimAfter runs the claim statement sql after what b holds (settings,
// locks), in one round trip and one transaction.
func (s *Store) claimAfter(ctx context.Context, b *pgx.Batch, sql string, args ...any) (claimed []*jobs.Job, err error) {
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		claimed, err = collectClaimed(rows, nil)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return claimed, nil
}

// sortClaimed puts claimed jobs in claim order (RETURNING has none).
func sortClaimed(claimed []*jobs.Job) {
	slices.SortFunc(claimed, func(a, b *jobs.Job) int {
		return cmp.Or(
			cmp.Compare(a.EffectivePriority, b.EffectivePriority),
			a.RunAt.Compare(b.RunAt),
			a.CreatedAt.Compare(b.CreatedAt),
			slices.Compare(a.ID[:], b.ID[:]),
		)
	})
}

// extendLeasesSQL extends the leases a worker still holds. A lease whose
// token no longer matches (reaped, re-claimed, finished) is not extended
// and not returned, which tells the worker to stop that job. Only a
// running job holds a token, so the token match is the running guard; see
// finishSQL for why nothing else may be.
//
// Progress reported since the last heartbeat rides along (has_progress
// says which rows carry it), so it costs no statement of its own.
const extendLeasesSQL = `
UPDATE jobs j SET
	lease_expires_at = now() + $3 * interval '1 millisecond',
	progress = CASE WHEN l.has_progress THEN l.progress ELSE j.progress END,
	progress_message = CASE WHEN l.has_progress THEN nullif(l.message, '') ELSE j.progress_message END
FROM unnest($1::uuid[], $2::uuid[], $4::boolean[], $5::smallint[], $6::text[]) AS l(id, token, has_progress, progress, message)
WHERE j.id = l.id AND j.lease_token = l.token
  AND ($7::float8 IS NULL OR j.timeout_seconds IS NULL
       OR coalesce(j.started_at, now()) + (j.timeout_seconds * 1000 + $7) * interval '1 millisecond' > now())
  AND ($8::text IS NULL OR j.worker_id = $8)
RETURNING j.id, j.cancel_requested, l.has_progress, j.type, j.queue, j.attempt, j.progress, j.progress_message`

// ExtendLeases extends the lease of every heartbeat in beats by ttl from
// now on the database clock, and stores the progress they carry. Leases
// missing from the result were lost: the worker must stop the job. Progress
// written is announced as an event, so the job page and the jobs list show
// it live.
func (s *Store) ExtendLeases(ctx context.Context, beats []domain.Heartbeat, ttl time.Duration) ([]domain.LeaseStatus, error) {
	return s.extendLeases(ctx, beats, ttl, nil, nil)
}

// extendLeases extends leases; with grace set, not those of jobs that ran
// past their timeout by more than grace; with holder set, only those that
// worker holds.
func (s *Store) extendLeases(ctx context.Context, beats []domain.Heartbeat, ttl time.Duration, grace *time.Duration, holder *string) ([]domain.LeaseStatus, error) {
	var out []domain.LeaseStatus
	err := retryDeadlocks(func() (err error) {
		out, err = s.extendLeasesOnce(ctx, beats, ttl, grace, holder)
		return err
	})
	return out, err
}

// extendLeasesOnce is one attempt of extendLeases.
func (s *Store) extendLeasesOnce(ctx context.Context, beats []domain.Heartbeat, ttl time.Duration, grace *time.Duration, holder *string) ([]domain.LeaseStatus, error) {
	if len(beats) == 0 {
		return nil, nil
	}
	beats = inLockOrder(beats, func(b domain.Heartbeat) uuid.UUID { return b.JobID })
	n := len(beats)
	ids, tokens := make([]uuid.UUID, n), make([]uuid.UUID, n)
	has, pcts, msgs := make([]bool, n), make([]int16, n), make([]string, n)
	for i, b := range beats {
		ids[i], tokens[i] = b.JobID, b.Token
		if b.Progress != nil {
			// Scrubbed as errors are (whoever reported it: a handler, a
			// remote worker, a push endpoint), then cut.
			has[i], pcts[i], msgs[i] = true, int16(b.Progress.Percent), truncate(logs.Scrub(b.Progress.Message), jobs.MaxProgressMessage)
		}
	}
	var graceMS *float64
	if grace != nil {
		g := float64(*grace) / float64(time.Millisecond)
		graceMS = &g
	}
	rows, err := s.pool.Query(ctx, extendLeasesSQL, ids, tokens, float64(ttl)/float64(time.Millisecond),
		has, pcts, msgs, graceMS, holder)
	if err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	defer rows.Close()
	out := make([]domain.LeaseStatus, 0, n)
	var progressed []domain.Event
	now := time.Now()
	for rows.Next() {
		var st domain.LeaseStatus
		var wrote bool
		var ev domain.Event
		var pct *int16
		if err := rows.Scan(&st.JobID, &st.CancelRequested, &wrote, &ev.Type, &ev.Queue, &ev.Attempt, &pct, &ev.ProgressMessage); err != nil {
			return nil, fmt.Errorf("extend leases: %w", err)
		}
		out = append(out, st)
		if wrote {
			ev.JobID, ev.Status, ev.At = st.JobID, jobs.StateRunning, now
			if pct != nil {
				p := int(*pct)
				ev.Progress = &p
			}
			progressed = append(progressed, ev)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	if len(progressed) > 0 && s.events != nil {
		s.events.Publish(progressed)
	}
	return out, nil
}
