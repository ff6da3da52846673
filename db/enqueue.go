package db

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/jobs"
)

// enqueueSQL inserts a batch of jobs from parallel arrays in one statement.
// A job with unfinished dependencies starts blocked; otherwise one whose
// run_at is in the future starts scheduled, and the rest queued. An
// idempotency key that exists already makes the row a no-op; the caller then
// reads the existing job. One notification per queue that gained queued jobs
// wakes the workers (PostgreSQL delivers it at commit).
const enqueueSQL = enqueueHead + jobColumns + enqueueTail + `inserted.*` + enqueueFrom

// enqueuePlainSQL is enqueueSQL for jobs without dependencies or a series:
// it returns only what the database decided (id, status, run_at,
// created_at), and newPlainJob fills in the rest from the request. A
// thousand full rows cost PostgreSQL and pgx more than the insert itself.
const enqueuePlainSQL = enqueueHead + `id, queue, status, run_at, effective_priority, created_at` + enqueueTail +
	`inserted.id, inserted.status, inserted.run_at, inserted.created_at` + enqueueFrom

const enqueueHead = `
WITH input AS (
	SELECT t.id, t.type, t.queue, t.payload::jsonb AS payload, t.priority, t.max_retries,
	       coalesce(t.run_at, now() + t.delay_ms * interval '1 millisecond') AS run_at,
	       nullif(t.timeout_seconds, 0) AS timeout_seconds, t.idempotency_key, t.blocked,
	       t.schedule_id, t.scheduled_for, t.concurrency_key, t.ord
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::integer[],
	            $7::timestamptz[], $8::float8[], $9::integer[], $10::text[], $11::boolean[],
	            $12::uuid[], $13::timestamptz[], $14::text[])
	     WITH ORDINALITY AS t(id, type, queue, payload, priority, max_retries, run_at, delay_ms,
	                          timeout_seconds, idempotency_key, blocked, schedule_id, scheduled_for,
	                          concurrency_key, ord)
),
inserted AS (
	INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, max_retries,
	                  run_at, timeout_seconds, idempotency_key, schedule_id, scheduled_for, concurrency_key)
	SELECT id, type, queue, payload, priority, priority,
	       CASE WHEN blocked THEN 'blocked' WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
	       max_retries, run_at, timeout_seconds, idempotency_key, schedule_id, scheduled_for, concurrency_key
	FROM input
	ORDER BY ord
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING `

const enqueueTail = `
),
notified AS (
	SELECT count(pg_notify('` + ChannelJobs + `', q.queue)) AS n
	FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'queued') q
),` + notifyScheduledHead + `inserted` + notifyScheduledTail + `
SELECT `

const enqueueFrom = ` FROM inserted, notified, sched_notified`

// existingByKeySQL reads the jobs that hold idempotency keys, live or in
// the history (a key is in one of them, never both).
const existingByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ANY($1::text[])
UNION ALL SELECT ` + jobColumns + ` FROM job_history
WHERE id IN (SELECT job_id FROM job_history_keys WHERE idempotency_key = ANY($1::text[]))`

// archivedKeysSQL finds which of the keys new jobs were just inserted with
// belong to a job in the history. It runs after the insert, in its
// transaction: the archiver moves a job by deleting it from jobs, so an
// insert that found no conflict there either came after the move (and this
// statement, with a later snapshot, sees the history row) or the key is
// new.
const archivedKeysSQL = `SELECT idempotency_key FROM job_history_keys WHERE idempotency_key = ANY($1::text[])`

// dropDuplicatesSQL removes jobs inserted in this transaction whose key
// turned out to be taken by a job in the history.
const dropDuplicatesSQL = `DELETE FROM jobs WHERE id = ANY($1::uuid[])`

// dropArchivedKeys removes from inserted (and from the database) the new
// jobs whose idempotency key belongs to a job in the history: that job
// stands for them.
func dropArchivedKeys(ctx context.Context, q DBTX, inserted []*jobs.Job) ([]*jobs.Job, error) {
	var keys []string
	for _, j := range inserted {
		if j.IdempotencyKey != nil {
			keys = append(keys, *j.IdempotencyKey)
		}
	}
	if len(keys) == 0 {
		return inserted, nil
	}
	rows, err := q.Query(ctx, archivedKeysSQL, keys)
	if err != nil {
		return nil, err
	}
	taken, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(taken) == 0 {
		return inserted, err
	}
	isTaken := make(map[string]bool, len(taken))
	for _, k := range taken {
		isTaken[k] = true
	}
	kept := inserted[:0:0]
	var dup []uuid.UUID
	for _, j := range inserted {
		if j.IdempotencyKey != nil && isTaken[*j.IdempotencyKey] {
			dup = append(dup, j.ID)
		} else {
			kept = append(kept, j)
		}
	}
	if _, err := q.Exec(ctx, dropDuplicatesSQL, uuidArray(dup)); err != nil {
		return nil, err
	}
	return kept, nil
}

// lockDependenciesSQL reads the dependencies of new jobs, holding them so
// that none can complete between this read and the commit: a dependency
// that completes afterwards finds the new edge and releases the job.
const lockDependenciesSQL = `SELECT id, status, deleted_at IS NOT NULL FROM jobs WHERE id = ANY($1::uuid[]) FOR SHARE`

const insertEdgesSQL = `
INSERT INTO job_dependencies (job_id, depends_on_id) SELECT * FROM unnest($1::uuid[], $2::uuid[]) ON CONFLICT DO NOTHING`

const insertScheduleSQL = `
INSERT INTO job_schedules (id, type, queue, payload, priority, max_retries, timeout_seconds,
                           interval_seconds, cron, timezone, next_run_at, concurrency_key)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, nullif($7, 0), nullif($8, 0), nullif($9, ''), $10, $11, nullif($12, ''))`

// Enqueue inserts jobs in one transaction, in order. Each params entry must
// already have passed jobs.EnqueueParams.Validate.
func (s *Store) Enqueue(ctx context.Context, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	var out []jobs.Enqueued
	var err error
	if copyable(params) {
		out, err = s.enqueueCopy(ctx, params)
	} else if !needsTx(params) {
		out, err = EnqueueTx(ctx, s.pool, params...)
	} else {
		err = s.withTx(ctx, func(tx pgx.Tx) error {
			var err error
			out, err = EnqueueTx(ctx, tx, params...)
			return err
		})
	}
	if err == nil && s.events != nil {
		s.Announce(out)
	}
	return out, err
}

// Announce publishes the current state of jobs enqueued with EnqueueTx in
// the caller's own transaction, once it has committed (the store cannot know
// when that happens).
func (s *Store) Announce(enqueued []jobs.Enqueued) {
	var inserted []*jobs.Job
	for _, e := range enqueued {
		if e.Inserted {
			inserted = append(inserted, e.Job)
		}
	}
	s.emitJobs(inserted...)
}

// needsTx reports whether enqueueing params takes more than one statement.
func needsTx(params []jobs.EnqueueParams) bool {
	if hasEdgesOrSeries(params) {
		return true
	}
	for i := range params {
		if params[i].IdempotencyKey != "" {
			return true // the history check after the insert (dropArchivedKeys)
		}
	}
	return false
}

// hasEdgesOrSeries reports whether some job has dependencies or a
// recurrence: the insert then returns whole rows.
func hasEdgesOrSeries(params []jobs.EnqueueParams) bool {
	for i := range params {
		if len(params[i].DependsOn) > 0 || params[i].Recurring() {
			return true
		}
	}
	return false
}

// EnqueueTx inserts jobs through q, which may be the caller's own
// transaction: the jobs then exist (and workers wake) only if it commits.
// Jobs with dependencies, a recurrence or an idempotency key need q to be
// a transaction (Store.Enqueue opens one): a keyed insert is checked
// against the history after it, and a duplicate must not be visible, let
// alone claimable, before it is removed.
func EnqueueTx(ctx context.Context, q DBTX, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if len(params) == 0 {
		return nil, nil
	}
	if _, isTx := q.(pgx.Tx); !isTx && needsTx(params) {
		return nil, errors.New("enqueue: jobs with dependencies, a recurrence or an idempotency key need a transaction; pass one (or use Store.Enqueue)")
	}
	n := len(params)
	var (
		ids       = make([]uuid.UUID, n)
		types     = make([]string, n)
		queues    = make([]string, n)
		payloads  = make([]string, n)
		prios     = make([]int16, n)
		retries   = make([]int32, n)
		runAts    = make([]*time.Time, n)
		delays    = make([]float64, n)
		timeouts  = make([]int32, n)
		keys      = make([]*string, n)
		ckeys     = make([]*string, n)
		blocked   = make([]bool, n)
		schedules = make([]*uuid.UUID, n)
		fireAts   = make([]*time.Time, n)
		wantKeys  []string
	)
	for i := range params {
		p := &params[i]
		ids[i] = p.ID
		if ids[i] == uuid.Nil {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("enqueue: new id: %w", err)
			}
			ids[i] = id
		}
		types[i] = p.Type
		queues[i] = cmp.Or(p.Queue, jobs.DefaultQueue)
		payloads[i] = cmp.Or(string(p.Payload), "{}")
		prios[i] = int16(cmp.Or(p.Priority, jobs.DefaultPriority))
		retries[i] = jobs.DefaultMaxRetries
		if p.MaxRetries != nil {
			retries[i] = int32(*p.MaxRetries)
		}
		runAts[i] = p.RunAt
		delays[i] = float64(p.Delay) / float64(time.Millisecond)
		timeouts[i] = int32(p.TimeoutSeconds)
		if p.IdempotencyKey != "" {
			k := p.IdempotencyKey
			keys[i] = &k
			wantKeys = append(wantKeys, k)
		}
		if p.ConcurrencyKey != "" {
			ck := p.ConcurrencyKey
			ckeys[i] = &ck
		}
	}
	if err := resolveDependencies(ctx, q, params, ids, blocked); err != nil {
		return nil, err
	}
	if err := createSchedules(ctx, q, params, keys, runAts, delays, schedules, fireAts); err != nil {
		return nil, err
	}

	args := []any{uuidArray(ids), types, queues, payloads, prios, retries,
		runAts, delays, timeouts, keys, blocked, nullableUUIDArray(schedules), fireAts, ckeys}
	var inserted []*jobs.Job
	var err error
	if hasEdgesOrSeries(params) {
		inserted, err = collectJobs(q.Query(ctx, enqueueSQL, args...))
	} else {
		inserted, err = insertPlain(ctx, q, params, ids, args)
	}
	if err == nil && len(wantKeys) > 0 {
		inserted, err = dropArchivedKeys(ctx, q, inserted)
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	byID := make(map[uuid.UUID]*jobs.Job, len(inserted))
	for _, j := range inserted {
		byID[j.ID] = j
	}
	var byKey map[string]*jobs.Job
	if len(inserted) < n && len(wantKeys) > 0 {
		existing, err := collectJobs(q.Query(ctx, existingByKeySQL, wantKeys))
		if err != nil {
			return nil, fmt.Errorf("enqueue: read existing idempotency keys: %w", err)
		}
		byKey = make(map[string]*jobs.Job, len(existing))
		for _, j := range existing {
			byKey[*j.IdempotencyKey] = j
		}
	}
	out := make([]jobs.Enqueued, n)
	actual := make(map[uuid.UUID]uuid.UUID, n) // assigned id → the job that stands for it
	for i := range params {
		if j, ok := byID[ids[i]]; ok {
			out[i] = jobs.Enqueued{Job: j, Inserted: true}
		} else if j, ok := byKey[deref(keys[i])]; ok && keys[i] != nil {
			out[i] = jobs.Enqueued{Job: j}
		} else {
			return nil, fmt.Errorf("enqueue: job %d was neither inserted nor found by its idempotency key", i)
		}
		actual[ids[i]] = out[i].Job.ID
	}
	if err := insertEdges(ctx, q, params, out, actual); err != nil {
		return nil, err
	}
	return out, nil
}

// resolveDependencies checks the dependencies that are not in this batch
// (they must exist, sit outside the bin and be able to complete) and marks
// each new job blocked unless every dependency has completed already.
func resolveDependencies(ctx context.Context, q DBTX, params []jobs.EnqueueParams, ids []uuid.UUID, blocked []bool) error {
	inBatch := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		inBatch[id] = true
	}
	var external []uuid.UUID
	for i := range params {
		for _, d := range params[i].DependsOn {
			if !inBatch[d] {
				external = append(external, d)
			}
		}
	}
	type depState struct {
		status  jobs.State
		deleted bool
	}
	states := map[uuid.UUID]depState{}
	if len(external) > 0 {
		// A dependency in the history comes back to jobs, where the
		// workflow statements and the new edges' foreign keys find it.
		if err := unarchive(ctx, q, external); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		rows, err := q.Query(ctx, lockDependenciesSQL, external)
		if err != nil {
			return fmt.Errorf("enqueue: read dependencies: %w", err)
		}
		for rows.Next() {
			var id uuid.UUID
			var st depState
			var status string
			if err := rows.Scan(&id, &status, &st.deleted); err != nil {
				rows.Close()
				return fmt.Errorf("enqueue: read dependencies: %w", err)
			}
			st.status = jobs.State(status)
			states[id] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("enqueue: read dependencies: %w", err)
		}
	}
	for i := range params {
		for k, d := range params[i].DependsOn {
			if inBatch[d] {
				blocked[i] = true
				continue
			}
			field := fmt.Sprintf("depends_on[%d]", k)
			st, ok := states[d]
			switch {
			case !ok:
				return jobs.Invalid(field, "no job has id %s", d)
			case st.deleted:
				return jobs.Invalid(field, "job %s is in the bin; restore it first", d)
			case st.status == jobs.StateCancelled || st.status == jobs.StateDeadLetter:
				return jobs.Invalid(field, "job %s is %s and will not complete unless replayed", d, st.status)
			case st.status != jobs.StateCompleted:
				blocked[i] = true
			}
		}
	}
	return nil
}

const keyExistsSQL = `SELECT EXISTS (SELECT 1 FROM jobs WHERE idempotency_key = $1)
	OR EXISTS (SELECT 1 FROM job_history_keys WHERE idempotency_key = $1)`

// createSchedules creates the series of recurring jobs and sets each first
// occurrence's run_at to the series' first firing time.
func createSchedules(ctx context.Context, q DBTX, params []jobs.EnqueueParams, keys []*string,
	runAts []*time.Time, delays []float64, schedules []*uuid.UUID, fireAts []*time.Time) error {
	var now time.Time
	for i := range params {
		p := &params[i]
		if !p.Recurring() {
			continue
		}
		if now.IsZero() {
			if err := q.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
				return fmt.Errorf("enqueue: read clock: %w", err)
			}
		}
		if keys[i] != nil {
			var exists bool
			if err := q.QueryRow(ctx, keyExistsSQL, *keys[i]).Scan(&exists); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
			if exists {
				continue // the insert returns the existing job; no second series
			}
		}
		start := now.Add(time.Duration(delays[i] * float64(time.Millisecond)))
		if runAts[i] != nil {
			start = *runAts[i]
		}
		first := start
		tz := cmp.Or(p.Timezone, "UTC")
		if p.Cron != "" {
			cs, err := jobs.ParseCron(p.Cron, p.Timezone)
			if err != nil {
				return jobs.Invalid("cron", "%s", err.Error())
			}
			first = cs.Next(start.Add(-time.Nanosecond))
		}
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("enqueue: new id: %w", err)
		}
		retries := jobs.DefaultMaxRetries
		if p.MaxRetries != nil {
			retries = *p.MaxRetries
		}
		if _, err := q.Exec(ctx, insertScheduleSQL, id, p.Type, cmp.Or(p.Queue, jobs.DefaultQueue),
			cmp.Or(string(p.Payload), "{}"), cmp.Or(p.Priority, jobs.DefaultPriority), retries, p.TimeoutSeconds,
			p.IntervalSeconds, p.Cron, tz, first, p.ConcurrencyKey); err != nil {
			return fmt.Errorf("enqueue: create recurring series: %w", err)
		}
		runAts[i], delays[i], schedules[i], fireAts[i] = &first, 0, &id, &first
	}
	return nil
}

// insertEdges records the dependencies of the jobs that were inserted, then
// releases any whose dependencies turned out to be complete already (a
// dependency in the same batch matched an existing, completed job by its
// idempotency key).
func insertEdges(ctx context.Context, q DBTX, params []jobs.EnqueueParams, out []jobs.Enqueued, actual map[uuid.UUID]uuid.UUID) error {
	var children, parents, standIns []uuid.UUID
	var blockedKids []uuid.UUID
	for i := range params {
		if !out[i].Inserted || len(params[i].DependsOn) == 0 {
			continue
		}
		for _, d := range params[i].DependsOn {
			if a, ok := actual[d]; ok && a != d {
				d = a
				standIns = append(standIns, a) // an existing job, perhaps in the history
			}
			children = append(children, out[i].Job.ID)
			parents = append(parents, d)
		}
		if out[i].Job.Status == jobs.StateBlocked {
			blockedKids = append(blockedKids, out[i].Job.ID)
		}
	}
	if len(children) == 0 {
		return nil
	}
	// A job of the batch whose key an existing job held stands for it; the
	// edges to it need it in jobs.
	if err := unarchive(ctx, q, standIns); err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	if _, err := q.Exec(ctx, insertEdgesSQL, children, parents); err != nil {
		return fmt.Errorf("enqueue: record dependencies: %w", err)
	}
	if len(blockedKids) > 0 {
		released, err := collectMoved(q.Query(ctx, releaseSQL, blockedKids))
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		releasedSet := map[uuid.UUID]jobs.State{}
		for _, m := range released {
			releasedSet[m.JobID] = m.Status
		}
		for i := range out {
			if st, ok := releasedSet[out[i].Job.ID]; ok {
				out[i].Job.Status = st
			}
		}
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// copyMin is the smallest batch that Enqueue writes with COPY. Below it the
// extra round trips (a clock read, the copy's own exchange, the commit) cost
// more than the single insert statement's per-row work.
const copyMin = 64

// copyColumns are the columns a COPY batch sets; every other column takes
// its default, which for a new plain job is what the insert statement sets.
var copyColumns = []string{"id", "type", "queue", "payload", "priority", "effective_priority", "status",
	"max_retries", "run_at", "timeout_seconds", "created_at", "updated_at", "concurrency_key"}

// copyable reports whether params can be written with COPY: a large batch
// of plain jobs, none of which needs the insert statement's ON CONFLICT (an
// idempotency key), a dependency check or a recurring series.
func copyable(params []jobs.EnqueueParams) bool {
	if len(params) < copyMin {
		return false
	}
	for i := range params {
		p := &params[i]
		if p.IdempotencyKey != "" || len(p.DependsOn) > 0 || p.Recurring() {
			return false
		}
	}
	return true
}

// notifyManySQL sends one notification per (channel, payload) pair.
const notifyManySQL = `SELECT count(pg_notify(c, m)) FROM unnest($1::text[], $2::text[]) AS n(c, m)`

// enqueueCopy writes a batch of plain jobs with COPY, about a third cheaper
// for PostgreSQL than the insert statement (no unnest, no RETURNING). It
// reads the transaction's clock first, so the jobs it returns carry the
// created_at, run_at and status that were stored, and it sends the same
// notifications as enqueueSQL before the commit that delivers them. The
// payloads are returned as the caller sent them, not as jsonb prints them.
func (s *Store) enqueueCopy(ctx context.Context, params []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	n := len(params)
	out := make([]jobs.Enqueued, n)
	rows := make([][]any, n)
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("enqueue: read clock: %w", err)
		}
		var queued []string
		var scheduled []*jobs.Job
		seen := map[string]bool{}
		for i := range params {
			j, err := newPlainJob(&params[i], now)
			if err != nil {
				return err
			}
			var timeout *int32
			if j.TimeoutSeconds > 0 {
				t := int32(j.TimeoutSeconds)
				timeout = &t
			}
			rows[i] = []any{[16]byte(j.ID), j.Type, j.Queue, string(j.Payload), int16(j.Priority), j.EffectivePriority,
				string(j.Status), int32(j.MaxRetries), j.RunAt, timeout, now, now, j.ConcurrencyKey}
			out[i] = jobs.Enqueued{Job: j, Inserted: true}
			if j.Status == jobs.StateQueued && !seen[j.Queue] {
				seen[j.Queue] = true
				queued = append(queued, j.Queue)
			} else if j.Status == jobs.StateScheduled {
				scheduled = append(scheduled, j)
			}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, copyColumns, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		channels, notes := enqueueNotifications(queued, scheduled)
		if len(notes) > 0 {
			if _, err := tx.Exec(ctx, notifyManySQL,
				channels, notes); err != nil {
				return fmt.Errorf("enqueue: notify: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// newPlainJob is the job enqueueSQL would store for p at now: queued, or
// scheduled when it runs later.
func newPlainJob(p *jobs.EnqueueParams, now time.Time) (*jobs.Job, error) {
	id := p.ID
	if id == uuid.Nil {
		var err error
		if id, err = uuid.NewV7(); err != nil {
			return nil, fmt.Errorf("enqueue: new id: %w", err)
		}
	}
	runAt := now.Add(p.Delay)
	if p.RunAt != nil {
		runAt = *p.RunAt
	}
	// PostgreSQL keeps microseconds; the returned job says what is stored.
	runAt = runAt.Truncate(time.Microsecond)
	status := jobs.StateQueued
	if runAt.After(now) {
		status = jobs.StateScheduled
	}
	retries := jobs.DefaultMaxRetries
	if p.MaxRetries != nil {
		retries = *p.MaxRetries
	}
	prio := cmp.Or(p.Priority, jobs.DefaultPriority)
	payload := p.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	var ckey *string
	if p.ConcurrencyKey != "" {
		k := p.ConcurrencyKey
		ckey = &k
	}
	return &jobs.Job{
		ConcurrencyKey:    ckey,
		ID:                id,
		Type:              p.Type,
		Queue:             cmp.Or(p.Queue, jobs.DefaultQueue),
		Payload:           payload,
		Priority:          prio,
		EffectivePriority: float64(prio),
		Status:            status,
		MaxRetries:        retries,
		RunAt:             runAt,
		TimeoutSeconds:    p.TimeoutSeconds,
		CreatedAt:         now,
		UpdatedAt:         now,
	}, nil
}

// enqueueNotifications are the notifications enqueueSQL sends for new
// jobs: one per queue that gained queued jobs, and the scheduled jobs in
// chunks of 90 (notifyScheduledHead's format).
func enqueueNotifications(queued []string, scheduled []*jobs.Job) (channels, notes []string) {
	for _, q := range queued {
		channels, notes = append(channels, ChannelJobs), append(notes, q)
	}
	for len(scheduled) > 0 {
		chunk := scheduled[:min(90, len(scheduled))]
		scheduled = scheduled[len(chunk):]
		parts := make([]string, len(chunk))
		for i, j := range chunk {
			// Rounded to the millisecond, as the statement's ::bigint cast does.
			parts[i] = fmt.Sprintf("%s %d %v %d", j.ID, (j.RunAt.UnixMicro()+500)/1000, j.EffectivePriority, j.CreatedAt.UnixMicro())
		}
		channels, notes = append(channels, ChannelScheduled), append(notes, strings.Join(parts, ","))
	}
	return channels, notes
}

// insertPlain runs enqueuePlainSQL and returns the jobs it inserted.
func insertPlain(ctx context.Context, q DBTX, params []jobs.EnqueueParams, ids []uuid.UUID, args []any) ([]*jobs.Job, error) {
	rows, err := q.Query(ctx, enqueuePlainSQL, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	index := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	var out []*jobs.Job
	for rows.Next() {
		var id uuid.UUID
		var status string
		var runAt, created time.Time
		if err := rows.Scan(&id, &status, &runAt, &created); err != nil {
			return nil, err
		}
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("inserted job %s was not in the batch", id)
		}
		p := params[i]
		p.ID = id
		j, err := newPlainJob(&p, created)
		if err != nil {
			return nil, err
		}
		j.Status, j.RunAt = jobs.State(status), runAt
		if p.IdempotencyKey != "" {
			k := p.IdempotencyKey
			j.IdempotencyKey = &k
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
