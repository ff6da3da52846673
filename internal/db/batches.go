package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// Batches (see jobs/batch.go and the workflows_carry_data migration): the
// batches row holds the counters a trigger on jobs keeps as members move,
// and the transaction that moves the last member settles the batch and
// enqueues its callbacks. Members are counted in here, by the transaction
// that creates them, after they are inserted: the batch's row is locked
// last, as the trigger locks it after the members' rows, so that adding
// members never deadlocks with members finishing.

const insertBatchSQL = `INSERT INTO batches (id) VALUES ($1)`

const insertCallbacksSQL = `
INSERT INTO batch_callbacks (batch_id, kind, job_id, type, queue, payload, priority, max_retries, timeout_seconds, concurrency_key,
                             traceparent)
SELECT $1, * FROM unnest($2::text[], $3::uuid[], $4::text[], $5::text[], $6::jsonb[], $7::smallint[], $8::integer[],
                         $9::integer[], $10::text[], $11::text[])`

// countMembersSQL counts $2 new members into open batch $1, within the
// bound $3; no row means the batch is closed, over the bound or missing.
const countMembersSQL = `
UPDATE batches SET total = total + $2, pending = pending + $2
WHERE id = $1 AND closed_at IS NULL AND total + $2 <= $3
RETURNING total`

const batchStandingSQL = `SELECT closed_at IS NOT NULL, total FROM batches WHERE id = $1`

// closeBatchSQL closes batch $1 (if open and not empty) and settles it if
// its members have all finished already.
const closeBatchSQL = `
WITH closed AS (
	UPDATE batches SET closed_at = now() WHERE id = $1 AND closed_at IS NULL AND total > 0 RETURNING id
)
SELECT flint_settle_batch(id) FROM closed`

// CreateBatch creates a batch with its first members and its callbacks,
// in one transaction, and closes it unless p.Open. Every params entry
// must have passed jobs.EnqueueParams.Validate.
func (s *Store) CreateBatch(ctx context.Context, p domain.BatchParams) (b *domain.Batch, out []jobs.Enqueued, err error) {
	if p.ID == uuid.Nil {
		p.ID = uuid.Must(uuid.NewV7())
	}
	if tracing.Enabled() {
		var end func([]jobs.Enqueued, error)
		ctx, p, end = traceBatch(ctx, p)
		defer func() { end(out, err) }()
	}
	return s.createBatch(ctx, p)
}

func (s *Store) createBatch(ctx context.Context, p domain.BatchParams) (*domain.Batch, []jobs.Enqueued, error) {
	id := p.ID
	if id == uuid.Nil {
		id = uuid.Must(uuid.NewV7())
	}
	var out []jobs.Enqueued
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insertBatchSQL, id); err != nil {
			return fmt.Errorf("create batch: %w", err)
		}
		if err := insertCallbacks(ctx, tx, id, p.Callbacks); err != nil {
			return err
		}
		var err error
		if out, err = addMembers(ctx, tx, id, p.Jobs); err != nil {
			return err
		}
		if !p.Open {
			if _, err := tx.Exec(ctx, closeBatchSQL, id); err != nil {
				return fmt.Errorf("close batch: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	s.Announce(out)
	b, err := s.GetBatch(ctx, id)
	return b, out, err
}

// AddToBatch adds members to open batch id: domain.ErrNotFound for no such
// batch, domain.ErrBatchClosed once it is closed.
func (s *Store) AddToBatch(ctx context.Context, id uuid.UUID, params []jobs.EnqueueParams) (b *domain.Batch, out []jobs.Enqueued, err error) {
	if tracing.Enabled() && len(params) > 0 {
		var end func([]jobs.Enqueued, error)
		ctx, params, end = traceEnqueue(ctx, "batch", params)
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("flint.batch.id", id.String()))
		defer func() { end(out, err) }()
	}
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = addMembers(ctx, tx, id, params)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	s.Announce(out)
	b, err = s.GetBatch(ctx, id)
	return b, out, err
}

// CloseBatch closes batch id (a closed batch stays as it is) and returns
// it: domain.ErrNotFound for no such batch, a validation error for an open
// batch without members.
func (s *Store) CloseBatch(ctx context.Context, id uuid.UUID) (*domain.Batch, error) {
	if _, err := s.pool.Exec(ctx, closeBatchSQL, id); err != nil {
		return nil, fmt.Errorf("close batch: %w", err)
	}
	b, err := s.GetBatch(ctx, id)
	if err == nil && b.State == domain.BatchOpen {
		return nil, jobs.Invalid("jobs", "the batch has no members: add at least one (POST /api/v1/batches/%s/jobs) before closing it", id)
	}
	return b, err
}

// addMembers enqueues params as members of batch id through tx, then
// counts them in.
func addMembers(ctx context.Context, tx pgx.Tx, id uuid.UUID, params []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if len(params) == 0 {
		return nil, nil
	}
	for i := range params {
		params[i].BatchID = id
	}
	out, err := enqueueTx(ctx, tx, params...)
	if err != nil {
		return nil, err
	}
	var total int
	err = tx.QueryRow(ctx, countMembersSQL, id, len(params), domain.MaxBatchMembers).Scan(&total)
	if !errors.Is(err, pgx.ErrNoRows) {
		if err != nil {
			return nil, fmt.Errorf("count batch members: %w", err)
		}
		return out, nil
	}
	var closed bool
	switch err := tx.QueryRow(ctx, batchStandingSQL, id).Scan(&closed, &total); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, domain.ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("read batch: %w", err)
	case closed:
		return nil, domain.ErrBatchClosed
	}
	return nil, jobs.Invalid("jobs", "the batch has %d members; %d more would pass the limit of %d", total, len(params), domain.MaxBatchMembers)
}

// insertCallbacks stores a new batch's callbacks, each with the id its job
// will have.
func insertCallbacks(ctx context.Context, tx pgx.Tx, batch uuid.UUID, cbs map[string]jobs.EnqueueParams) error {
	if len(cbs) == 0 {
		return nil
	}
	var kinds, types, queues, payloads []string
	var ids []uuid.UUID
	var prios []int16
	var retries []int32
	var timeouts []*int32
	var ckeys, traces []*string
	for _, kind := range domain.CallbackKinds {
		p, ok := cbs[kind]
		if !ok {
			continue
		}
		kinds, types, queues = append(kinds, kind), append(types, p.Type), append(queues, p.Queue)
		payload := string(p.Payload)
		if payload == "" {
			payload = "{}"
		}
		payloads = append(payloads, payload)
		ids = append(ids, uuid.Must(uuid.NewV7()))
		prios = append(prios, int16(p.Priority))
		r := int32(domain.DefaultMaxRetries)
		if p.MaxRetries != nil {
			r = int32(*p.MaxRetries)
		}
		retries = append(retries, r)
		var t *int32
		if p.TimeoutSeconds > 0 {
			v := int32(p.TimeoutSeconds)
			t = &v
		}
		timeouts = append(timeouts, t)
		var ck *string
		if p.ConcurrencyKey != "" {
			ck = &p.ConcurrencyKey
		}
		ckeys = append(ckeys, ck)
		var tp *string
		if p.Traceparent != "" {
			tp = &p.Traceparent
		}
		traces = append(traces, tp)
	}
	if _, err := tx.Exec(ctx, insertCallbacksSQL, batch, kinds, ids, types, queues, payloads, prios, retries, timeouts, ckeys,
		traces); err != nil {
		return fmt.Errorf("create batch callbacks: %w", err)
	}
	return nil
}

// batchSQL reads batch $1 with its counts and callbacks (see batchColumns).
const batchSQL = `SELECT ` + batchColumns + ` FROM batches b WHERE b.id = $1`

// batchColumns reads a batch b: its row, its counts by status (the
// finished ones from its counters, the others from jobs, where unfinished
// members always are), and its callbacks with their jobs' statuses.
const batchColumns = `b.id, b.created_at, b.closed_at, b.settled_at, b.died_at, b.total, b.pending, b.completed, b.dead_letter,
	` + batchCountsSQL + `,
	(SELECT coalesce(jsonb_object_agg(c.kind, jsonb_build_object(
		'id', c.job_id, 'type', c.type, 'queue', c.queue, 'fired_at', c.fired_at,
		'status', coalesce(cj.status, (SELECT h.status FROM job_history h WHERE h.id = c.job_id AND h.finished_at >= c.fired_at)))), '{}')
	 FROM batch_callbacks c LEFT JOIN jobs cj ON cj.id = c.job_id WHERE c.batch_id = b.id)`

// batchRow is a row of batchColumns.
type batchRow struct {
	ID                    uuid.UUID
	CreatedAt             time.Time
	ClosedAt, SettledAt   *time.Time
	DiedAt                *time.Time
	Total, Pending        int
	Completed, DeadLetter int
	Counts                map[string]int
	Callbacks             map[string]domain.BatchCallback
}

// GetBatch returns batch id, or domain.ErrNotFound.
func (s *Store) GetBatch(ctx context.Context, id uuid.UUID) (*domain.Batch, error) {
	rows, err := s.pool.Query(ctx, batchSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[batchRow])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, domain.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	return r.toBatch(), nil
}

// toBatch derives the batch's state and its callbacks' statuses.
func (r *batchRow) toBatch() *domain.Batch {
	b := &domain.Batch{ID: r.ID, Total: r.Total, Counts: r.Counts, Callbacks: r.Callbacks, CreatedAt: r.CreatedAt,
		ClosedAt: r.ClosedAt, SettledAt: r.SettledAt, DiedAt: r.DiedAt}
	switch {
	case r.ClosedAt == nil:
		b.State = domain.BatchOpen
	case r.Pending > 0:
		b.State = domain.BatchRunning
	case r.Completed == r.Total:
		b.State = domain.BatchSucceeded
	case r.DeadLetter > 0:
		b.State = domain.BatchDead
	default:
		b.State = domain.BatchCompleted
	}
	for kind, c := range b.Callbacks {
		if c.FiredAt != nil {
			continue
		}
		c.Status = domain.CallbackPending
		settled := r.SettledAt != nil
		if (kind == domain.OnDeath && settled && r.DiedAt == nil) || (kind == domain.OnSuccess && settled && r.Completed != r.Total) {
			c.Status = domain.CallbackSkipped
		}
		b.Callbacks[kind] = c
	}
	return b
}

// listBatchesSQL reads a page of batches, newest first (ids are UUIDv7),
// after cursor $1 (a batch id, or NULL for the first page).
const listBatchesSQL = `SELECT ` + batchColumns + ` FROM batches b
WHERE $1::uuid IS NULL OR b.id < $1 ORDER BY b.id DESC LIMIT $2`

// ListBatches returns up to limit batches, newest first, after cursor
// ("" for the first page; a page's NextCursor for the next).
func (s *Store) ListBatches(ctx context.Context, cursor string, limit int) (domain.BatchPage, error) {
	var after *uuid.UUID
	if cursor != "" {
		id, err := uuid.Parse(cursor)
		if err != nil {
			return domain.BatchPage{}, jobs.Invalid("cursor", "must be the next_cursor of a previous page")
		}
		after = &id
	}
	rows, err := s.pool.Query(ctx, listBatchesSQL, after, limit+1)
	if err != nil {
		return domain.BatchPage{}, fmt.Errorf("list batches: %w", err)
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[batchRow])
	if err != nil {
		return domain.BatchPage{}, fmt.Errorf("list batches: %w", err)
	}
	var page domain.BatchPage
	if len(rs) > limit {
		rs = rs[:limit]
		page.NextCursor = rs[limit-1].ID.String()
	}
	page.Batches = make([]domain.Batch, len(rs))
	for i := range rs {
		page.Batches[i] = *rs[i].toBatch()
	}
	return page, nil
}
