package db

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// copyMin is the smallest batch that Enqueue writes with COPY. Below it the
// extra round trips (a clock read, the copy's own exchange, the commit) cost
// more than the single insert statement's per-row work.
const copyMin = 64

// copyable reports whether params can be written with COPY: a large batch
// of plain jobs, none of which needs the insert statement's ON CONFLICT (an
// idempotency key), a dependency check or a recurring series.
func copyable(params []jobs.EnqueueParams) bool {
	if len(params) < copyMin {
		return false
	}
	for i := range params {
		p := &params[i]
		if p.IdempotencyKey != "" || len(p.DependsOn) > 0 || p.Recurring() || p.StepKey != "" || p.BatchID != uuid.Nil {
			return false
		}
	}
	return true
}

// enqueueCopy writes a batch of plain jobs with COPY, about a third cheaper
// for PostgreSQL than the insert statement (no unnest, no RETURNING). It
// reads the transaction's clock first, so the jobs it returns carry the
// created_at, run_at and status that were stored. The payloads are
// returned as the caller sent them, not as jsonb prints them.
func (s *Store) enqueueCopy(ctx context.Context, params []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	out := make([]jobs.Enqueued, len(params))
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("enqueue: read clock: %w", err)
		}
		pooled := copyBuffers.Get()
		defer copyBuffers.Put(pooled)
		buf := append((*pooled)[:0], copyHeader...)
		for i := range params {
			j, err := newPlainJob(&params[i], now)
			if err != nil {
				return err
			}
			buf = appendCopyJob(buf, j)
			out[i] = jobs.Enqueued{Job: j, Inserted: true}
		}
		buf = append(buf, copyTrailer...)
		*pooled = buf
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), copyJobsSQL); err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// anyRecurring reports whether some job starts a recurring series.
func anyRecurring(params []jobs.EnqueueParams) bool {
	for i := range params {
		if params[i].Recurring() {
			return true
		}
	}
	return false
}

// copyInsert is insert for a large batch without idempotency keys or
// recurrence in transaction tx (a spawn, a batch's members, a workflow):
// COPY, as enqueueCopy writes plain jobs, with the statuses
// resolveDependencies decided and the workflow columns set. Dependencies
// and step keys follow in their own statements, as they do after the
// insert statement.
func (in *enqueueInput) copyInsert(ctx context.Context, tx pgx.Tx, params []jobs.EnqueueParams) ([]*jobs.Job, error) {
	var now time.Time
	if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
		return nil, fmt.Errorf("read clock: %w", err)
	}
	pooled := copyBuffers.Get()
	defer copyBuffers.Put(pooled)
	buf := append((*pooled)[:0], copyHeader...)
	out := make([]*jobs.Job, len(params))
	for i := range params {
		p := params[i]
		p.ID = in.ids[i]
		j, err := newPlainJob(&p, now)
		if err != nil {
			return nil, err
		}
		if in.blocked[i] {
			j.Status = jobs.StateBlocked
		}
		j.HasParents = len(p.DependsOn) > 0
		if p.BatchID != uuid.Nil {
			b := p.BatchID
			j.BatchID = &b
		}
		buf = appendCopyJob(buf, j)
		out[i] = j
	}
	buf = append(buf, copyTrailer...)
	*pooled = buf
	if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), copyJobsSQL); err != nil {
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
	retries := domain.DefaultMaxRetries
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
		Traceparent:       p.Traceparent,
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
