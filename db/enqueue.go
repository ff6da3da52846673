package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
)

// enqueueSQL inserts a batch of jobs from parallel arrays in one statement.
// A job whose run_at is in the future starts scheduled, otherwise queued. An
// idempotency key that exists already makes the row a no-op; the caller then
// reads the existing job. One notification per queue that gained queued jobs
// wakes the workers (PostgreSQL delivers it at commit).
const enqueueSQL = `
WITH input AS (
	SELECT t.id, t.type, t.queue, t.payload::jsonb AS payload, t.priority, t.max_retries,
	       coalesce(t.run_at, now() + t.delay_ms * interval '1 millisecond') AS run_at,
	       nullif(t.timeout_seconds, 0) AS timeout_seconds, t.idempotency_key, t.ord
	FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::integer[],
	            $7::timestamptz[], $8::float8[], $9::integer[], $10::text[])
	     WITH ORDINALITY AS t(id, type, queue, payload, priority, max_retries, run_at, delay_ms,
	                          timeout_seconds, idempotency_key, ord)
),
inserted AS (
	INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, max_retries,
	                  run_at, timeout_seconds, idempotency_key)
	SELECT id, type, queue, payload, priority, priority,
	       CASE WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
	       max_retries, run_at, timeout_seconds, idempotency_key
	FROM input
	ORDER BY ord
	ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
	RETURNING ` + jobColumns + `
),
notified AS (
	SELECT count(pg_notify('` + ChannelJobs + `', q.queue)) AS n
	FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'queued') q
)
SELECT inserted.* FROM inserted, notified`

const existingByKeySQL = `SELECT ` + jobColumns + ` FROM jobs WHERE idempotency_key = ANY($1::text[])`

// Enqueue validates and inserts jobs in one transaction, in order. Each
// params entry must already have passed jobs.EnqueueParams.Validate.
func (s *Store) Enqueue(ctx context.Context, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	return EnqueueTx(ctx, s.pool, params...)
}

// EnqueueTx inserts jobs through q, which may be the caller's own
// transaction: the jobs then exist (and workers wake) only if it commits.
func EnqueueTx(ctx context.Context, q DBTX, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if len(params) == 0 {
		return nil, nil
	}
	n := len(params)
	var (
		ids      = make([]uuid.UUID, n)
		types    = make([]string, n)
		queues   = make([]string, n)
		payloads = make([]string, n)
		prios    = make([]int16, n)
		retries  = make([]int32, n)
		runAts   = make([]*time.Time, n)
		delays   = make([]float64, n)
		timeouts = make([]int32, n)
		keys     = make([]*string, n)
		wantKeys []string
	)
	for i := range params {
		p := &params[i]
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("enqueue: new id: %w", err)
		}
		ids[i] = id
		types[i] = p.Type
		queues[i] = p.Queue
		if queues[i] == "" {
			queues[i] = jobs.DefaultQueue
		}
		payloads[i] = string(p.Payload)
		if len(p.Payload) == 0 {
			payloads[i] = "{}"
		}
		prios[i] = int16(p.Priority)
		if prios[i] == 0 {
			prios[i] = jobs.DefaultPriority
		}
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
	}
	inserted, err := collectJobs(q.Query(ctx, enqueueSQL, ids, types, queues, payloads, prios, retries,
		runAts, delays, timeouts, keys))
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
	for i := range params {
		if j, ok := byID[ids[i]]; ok {
			out[i] = jobs.Enqueued{Job: j, Inserted: true}
			continue
		}
		if keys[i] != nil {
			if j, ok := byKey[*keys[i]]; ok {
				out[i] = jobs.Enqueued{Job: j}
				continue
			}
		}
		return nil, fmt.Errorf("enqueue: job %d was neither inserted nor found by its idempotency key", i)
	}
	return out, nil
}
