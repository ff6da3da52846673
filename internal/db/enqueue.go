package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// enqueueSQL inserts a batch of jobs from parallel arrays in one statement.
// A job with unfinished dependencies starts blocked; otherwise one whose
// run_at is in the future starts scheduled, and the rest queued. An
// idempotency key that exists already makes the row a no-op; the caller then
// reads the existing job. It sends no notification: a pg_notify would make
// the commit take PostgreSQL's cluster-wide notify lock (see wakeup.go);
// the store wakes the workers after the commit instead.
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
	       t.schedule_id, t.scheduled_for, t.concurrency_key, coalesce(t.has_parents, false) AS has_parents,
	       t.batch_id, t.traceparent, t.ord
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::integer[],
	            $7::timestamptz[], $8::float8[], $9::integer[], $10::text[], $11::boolean[],
	            $12::uuid[], $13::timestamptz[], $14::text[], $15::boolean[], $16::uuid[], $17::text[])
	     WITH ORDINALITY AS t(id, type, queue, payload, priority, max_retries, run_at, delay_ms,
	                          timeout_seconds, idempotency_key, blocked, schedule_id, scheduled_for,
	                          concurrency_key, has_parents, batch_id, traceparent, ord)
),
inserted AS (
	INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, max_retries,
	                  run_at, timeout_seconds, idempotency_key, schedule_id, scheduled_for, concurrency_key,
	                  has_parents, batch_id, traceparent)
	SELECT id, type, queue, payload, priority, priority,
	       CASE WHEN blocked THEN 'blocked' WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
	       max_retries, run_at, timeout_seconds, idempotency_key, schedule_id, scheduled_for, concurrency_key,
	       has_parents, batch_id, traceparent
	FROM input
	ORDER BY ord
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING `

const enqueueTail = `
)
SELECT `

const enqueueFrom = ` FROM inserted`

// Enqueue inserts jobs in one transaction, in order, and returns once it
// has committed. Each params entry must already have passed
// jobs.EnqueueParams.Validate. A single job without dependencies or a
// recurrence shares its transaction with the single jobs other callers
// enqueue at the same moment (see groupcommit.go); it is answered as if it
// had had a transaction of its own.
func (s *Store) Enqueue(ctx context.Context, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if tracing.Enabled() && len(params) > 0 {
		var end func([]jobs.Enqueued, error)
		ctx, params, end = traceEnqueue(ctx, "store", params)
		out, err := s.enqueue(ctx, params)
		end(out, err)
		return out, err
	}
	return s.enqueue(ctx, params)
}

func (s *Store) enqueue(ctx context.Context, params []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if s.group != nil && groupable(params) {
		e, err := s.group.submit(ctx, params[0])
		if err != nil {
			return nil, err
		}
		return []jobs.Enqueued{e}, nil
	}
	out, err := s.enqueueDirect(ctx, params)
	if err == nil {
		s.Announce(out)
	}
	return out, err
}

// Announce publishes the current state of jobs enqueued and wakes their
// workers, once they have committed. The state goes out first, as
// everywhere a change both publishes and wakes: a worker woken first
// could claim the job and publish "claimed" ahead of "queued".
func (s *Store) Announce(enqueued []jobs.Enqueued) {
	var inserted []*jobs.Job
	for _, e := range enqueued {
		if e.Inserted {
			inserted = append(inserted, e.Job)
		}
	}
	s.publish(inserted)
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

// hasEdgesOrSeries reports whether some job has dependencies, a
// recurrence, a workflow step key or a batch: the insert then returns
// whole rows, and more statements may follow it.
func hasEdgesOrSeries(params []jobs.EnqueueParams) bool {
	for i := range params {
		if p := &params[i]; len(p.DependsOn) > 0 || p.Recurring() || p.StepKey != "" || p.BatchID != uuid.Nil {
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
//
// Flint cannot see the caller's commit, so the wake-ups go out with it:
// the notifications are sent in q, and PostgreSQL delivers them at commit.
// That commit then takes PostgreSQL's notify lock (see wakeup.go); jobs
// that need not share the caller's transaction enqueue faster through
// Store.Enqueue.
func EnqueueTx(ctx context.Context, q DBTX, params ...jobs.EnqueueParams) (out []jobs.Enqueued, err error) {
	if tracing.Enabled() && len(params) > 0 {
		var end func([]jobs.Enqueued, error)
		ctx, params, end = traceEnqueue(ctx, "transaction", params)
		defer func() { end(out, err) }()
	}
	out, err = enqueueTx(ctx, q, params...)
	if err != nil {
		return nil, err
	}
	var queued []string
	var scheduled []*jobs.Job
	seen := map[string]bool{}
	for _, e := range out {
		switch {
		case !e.Inserted:
		case e.Job.Status == jobs.StateQueued && !seen[e.Job.Queue]:
			seen[e.Job.Queue] = true
			queued = append(queued, e.Job.Queue)
		case e.Job.Status == jobs.StateScheduled:
			scheduled = append(scheduled, e.Job)
		}
	}
	if channels, notes := enqueueNotifications(queued, scheduled); len(notes) > 0 {
		if _, err := q.Exec(ctx, notifyManySQL, channels, notes); err != nil {
			return nil, fmt.Errorf("enqueue: notify: %w", err)
		}
	}
	return out, nil
}

// enqueueTx is EnqueueTx without the notifications: the store sends them
// after its own commit.
func enqueueTx(ctx context.Context, q DBTX, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if len(params) == 0 {
		return nil, nil
	}
	if _, isTx := q.(pgx.Tx); !isTx && needsTx(params) {
		return nil, errors.New("enqueue: jobs with dependencies, a recurrence or an idempotency key need a transaction; pass one (or use Store.Enqueue)")
	}
	in, err := newEnqueueInput(params)
	if err != nil {
		return nil, err
	}
	if err := resolveDependencies(ctx, q, params, in.ids, in.blocked); err != nil {
		return nil, err
	}
	if err := createSchedules(ctx, q, params, in.keys, in.runAts, in.delays, in.schedules, in.fireAts); err != nil {
		return nil, err
	}
	inserted, err := in.insert(ctx, q, params)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	out, actual, err := in.match(ctx, q, inserted)
	if err != nil {
		return nil, err
	}
	reads := readsSpawner(params, out)
	if err := insertEdges(ctx, q, params, out, actual, reads); err != nil {
		return nil, err
	}
	if err := insertSteps(ctx, q, params, out, reads); err != nil {
		return nil, err
	}
	return out, nil
}

// enqueueInput is a batch of requests laid out as enqueueSQL's parallel
// arrays, one entry per request, in order.
type enqueueInput struct {
	ids       []uuid.UUID // the requests' ids, or new UUIDv7s
	types     []string
	queues    []string
	payloads  []string
	prios     []int16
	retries   []int32
	runAts    []*time.Time // nil: now plus delays
	delays    []float64    // in milliseconds
	timeouts  []int32
	keys      []*string // idempotency keys
	ckeys     []*string // concurrency keys
	parents   []bool    // has dependencies: the claim reads their results
	batches   []*uuid.UUID
	traces    []*string // traceparents; nil when no job has one
	blocked   []bool    // set by resolveDependencies
	schedules []*uuid.UUID
	fireAts   []*time.Time // set, with schedules, by createSchedules
	wantKeys  []string     // the idempotency keys asked for
}

// newEnqueueInput lays params out with their defaults filled in, giving
// each request without an id a new UUIDv7.
func newEnqueueInput(params []jobs.EnqueueParams) (enqueueInput, error) {
	n := len(params)
	in := enqueueInput{
		ids:       make([]uuid.UUID, n),
		types:     make([]string, n),
		queues:    make([]string, n),
		payloads:  make([]string, n),
		prios:     make([]int16, n),
		retries:   make([]int32, n),
		runAts:    make([]*time.Time, n),
		delays:    make([]float64, n),
		timeouts:  make([]int32, n),
		keys:      make([]*string, n),
		ckeys:     make([]*string, n),
		blocked:   make([]bool, n),
		schedules: make([]*uuid.UUID, n),
		fireAts:   make([]*time.Time, n),
	}
	for i := range params {
		p := &params[i]
		in.ids[i] = p.ID
		if in.ids[i] == uuid.Nil {
			id, err := uuid.NewV7()
			if err != nil {
				return in, fmt.Errorf("enqueue: new id: %w", err)
			}
			in.ids[i] = id
		}
		in.types[i] = p.Type
		in.queues[i] = cmp.Or(p.Queue, jobs.DefaultQueue)
		in.payloads[i] = cmp.Or(string(p.Payload), "{}")
		in.prios[i] = int16(cmp.Or(p.Priority, jobs.DefaultPriority))
		in.retries[i] = domain.DefaultMaxRetries
		if p.MaxRetries != nil {
			in.retries[i] = int32(*p.MaxRetries)
		}
		in.runAts[i] = p.RunAt
		in.delays[i] = float64(p.Delay) / float64(time.Millisecond)
		in.timeouts[i] = int32(p.TimeoutSeconds)
		if p.IdempotencyKey != "" {
			k := p.IdempotencyKey
			in.keys[i] = &k
			in.wantKeys = append(in.wantKeys, k)
		}
		if p.ConcurrencyKey != "" {
			ck := p.ConcurrencyKey
			in.ckeys[i] = &ck
		}
		// Plain jobs leave both columns out (NULL arrays, their defaults).
		if len(p.DependsOn) > 0 {
			if in.parents == nil {
				in.parents = make([]bool, n)
			}
			in.parents[i] = true
		}
		if p.BatchID != uuid.Nil {
			if in.batches == nil {
				in.batches = make([]*uuid.UUID, n)
			}
			b := p.BatchID
			in.batches[i] = &b
		}
		if p.Traceparent != "" {
			if in.traces == nil {
				in.traces = make([]*string, n)
			}
			tp := p.Traceparent
			in.traces[i] = &tp
		}
	}
	return in, nil
}

// insert runs the insert statement, enqueueSQL when the batch needs whole
// rows back and enqueuePlainSQL otherwise, and drops the new jobs whose
// idempotency key a job in the history holds. It returns the jobs it
// inserted, which lack those whose key was taken.
func (in *enqueueInput) insert(ctx context.Context, q DBTX, params []jobs.EnqueueParams) ([]*jobs.Job, error) {
	args := []any{in.ids, in.types, in.queues, in.payloads, in.prios, in.retries,
		in.runAts, in.delays, in.timeouts, in.keys, in.blocked, in.schedules, in.fireAts, in.ckeys,
		in.parents, in.batches, in.traces}
	if in.batches == nil {
		args[15] = nil
	}
	if in.traces == nil {
		args[16] = nil
	}
	if tx, ok := q.(pgx.Tx); ok && len(params) >= copyMin && len(in.wantKeys) == 0 && !anyRecurring(params) {
		return in.copyInsert(ctx, tx, params)
	}
	var inserted []*jobs.Job
	var err error
	if hasEdgesOrSeries(params) {
		inserted, err = collectJobs(q.Query(ctx, enqueueSQL, args...))
	} else {
		inserted, err = insertPlain(ctx, q, params, in.ids, args)
	}
	if err == nil && len(in.wantKeys) > 0 {
		inserted, err = dropArchivedKeys(ctx, q, inserted)
	}
	return inserted, err
}

// match answers each request with the job that stands for it: the one it
// inserted or, when its idempotency key was taken, the job holding the
// key (read with existingByKeySQL, only when some request inserted
// nothing). actual maps each request's id to that job's id.
func (in *enqueueInput) match(ctx context.Context, q DBTX, inserted []*jobs.Job) (out []jobs.Enqueued, actual map[uuid.UUID]uuid.UUID, err error) {
	n := len(in.ids)
	byID := make(map[uuid.UUID]*jobs.Job, len(inserted))
	for _, j := range inserted {
		byID[j.ID] = j
	}
	var byKey map[string]*jobs.Job
	if len(inserted) < n && len(in.wantKeys) > 0 {
		existing, err := collectJobs(q.Query(ctx, existingByKeySQL, in.wantKeys))
		if err != nil {
			return nil, nil, fmt.Errorf("enqueue: read existing idempotency keys: %w", err)
		}
		byKey = make(map[string]*jobs.Job, len(existing))
		for _, j := range existing {
			byKey[*j.IdempotencyKey] = j
		}
	}
	out = make([]jobs.Enqueued, n)
	actual = make(map[uuid.UUID]uuid.UUID, n) // assigned id → the job that stands for it
	for i, id := range in.ids {
		if j, ok := byID[id]; ok {
			out[i] = jobs.Enqueued{Job: j, Inserted: true}
		} else if j, ok := byKey[deref(in.keys[i])]; ok && in.keys[i] != nil {
			out[i] = jobs.Enqueued{Job: j}
		} else {
			return nil, nil, fmt.Errorf("enqueue: job %d was neither inserted nor found by its idempotency key", i)
		}
		actual[id] = out[i].Job.ID
	}
	return out, actual, nil
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
