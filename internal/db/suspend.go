package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// suspendSQL ends an attempt that sleeps or waits (the lock taken by
// stepLockSQL just before, in the same implicit transaction): the job
// waits until $5, unless what it waits for is already there (a signal
// kept for it, a wake time passed), in which case it is queued at once.
// The attempt is refunded, as the wait is no failure, and the run is
// recorded as suspended. A job whose cancellation was asked while it ran
// is cancelled instead (its downstream jobs with it, by the caller). A
// sleep without a name (a pull worker's: it
// recorded its sleep as a step just before) is named after the job's
// last step. A claimed job whose handler suspended before its start was
// written carries the start in $7 (domain.Finish.StartedAt), as finishSQL's
// outcomes do.
const suspendSQL = `
WITH s AS (
	SELECT $5::timestamptz <= now()
	    OR ($3 <> 'sleep' AND EXISTS (SELECT 1 FROM job_signals WHERE job_id = $1 AND name = $4)) AS ready
),
moved AS (
	UPDATE jobs j SET
		status = CASE WHEN j.cancel_requested THEN 'cancelled' WHEN s.ready THEN 'queued' ELSE 'waiting' END,
		wait_kind = CASE WHEN s.ready OR j.cancel_requested THEN NULL ELSE $3 END,
		wait_name = CASE WHEN s.ready OR j.cancel_requested THEN NULL
		                 ELSE coalesce(nullif($4, ''), (SELECT name FROM job_steps WHERE job_id = $1 ORDER BY seq DESC LIMIT 1), 'sleep') END,
		run_at = CASE WHEN s.ready OR j.cancel_requested THEN now() ELSE $5 END,
		finished_at = CASE WHEN j.cancel_requested THEN now() ELSE j.finished_at END,
		attempt = j.attempt - 1,
		durable = true,
		started_at = coalesce(j.started_at, least($7::timestamptz, now())),
		lease_token = NULL,
		lease_expires_at = NULL,
		updated_at = now()
	FROM s
	WHERE j.id = $1 AND j.lease_token = $2
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.executions, j.worker_id, j.started_at,
	          j.run_at, j.effective_priority, j.created_at, j.batch_id
),
recorded AS (
	INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
	SELECT id, executions, attempt + 1, worker_id, coalesce(started_at, now()), now(), 'suspended', $6,
	       greatest(0, (extract(epoch FROM now() - started_at) * 1000)::bigint)
	FROM moved
)
SELECT ` + movedColumns + ` FROM moved`

// finishSuspended writes suspended outcomes (domain.OutcomeSuspended): for
// each, the sleep's step, if it has one, and the wait, fenced by the
// lease; all of them in one round trip and one transaction (a pipeline),
// in lock order. A lost lease gives a Moved without status. When the
// database refuses the pipeline, each is written on its own, so that
// only the one at fault fails.
func (s *Store) finishSuspended(ctx context.Context, fs []domain.Finish) ([]domain.Moved, error) {
	for _, f := range fs {
		if f.Wait == nil {
			return nil, errors.New("finish: a suspended outcome without its wait")
		}
	}
	out, err := s.finishSuspendedTx(ctx, fs)
	if err == nil || len(fs) == 1 || !isDataError(err) {
		return out, err
	}
	out = make([]domain.Moved, len(fs))
	for i, f := range fs {
		m, err := s.finishSuspendedTx(ctx, []domain.Finish{f})
		if err != nil {
			return nil, err
		}
		out[i] = m[0]
	}
	return out, nil
}

// finishSuspendedTx is finishSuspended's pipeline.
func (s *Store) finishSuspendedTx(ctx context.Context, fs []domain.Finish) ([]domain.Moved, error) {
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	order = inLockOrder(order, func(i int) uuid.UUID { return fs[i].JobID })
	b := &pgx.Batch{}
	for _, i := range order {
		f, w := fs[i], fs[i].Wait
		b.Queue(stepLockSQL, f.JobID, f.Token)
		if f.Step != nil {
			b.Queue(stepInsertSQL, f.JobID, f.Token, f.Step.Name, string(f.Step.Result), f.Step.StartedAt)
		}
		reason := fmt.Sprintf("waits for %s %q until %s", w.Kind, w.Name, w.Until.UTC().Format(time.RFC3339))
		if w.Name == "" {
			reason = "sleeps until " + w.Until.UTC().Format(time.RFC3339)
		}
		b.Queue(suspendSQL, f.JobID, f.Token, w.Kind, w.Name, w.Until, reason, f.StartedAt)
	}
	out := make([]domain.Moved, len(fs))
	err := retryDeadlocks(func() error {
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		for _, i := range order {
			f := fs[i]
			out[i] = domain.Moved{JobID: f.JobID}
			var attempt int
			held := true
			if err := br.QueryRow().Scan(&attempt); errors.Is(err, pgx.ErrNoRows) {
				held = false // the statements after the lock write nothing
			} else if err != nil {
				return fmt.Errorf("suspend job: %w", err)
			}
			if f.Step != nil {
				if _, err := br.Exec(); err != nil {
					return fmt.Errorf("suspend job: record %q: %w", f.Step.Name, err)
				}
			}
			moved, err := collectMoved(br.Query())
			if err != nil {
				return fmt.Errorf("suspend job: %w", err)
			}
			if held && len(moved) > 0 {
				out[i] = moved[0]
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// finishWithSuspended is FinishJobs for a batch holding suspended
// outcomes: each is written on its own (finishSuspended), the rest
// together.
func (s *Store) finishWithSuspended(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error) {
	finished = make([]domain.Moved, len(batch))
	var rest, suspended []domain.Finish
	var at, sat []int
	for i, f := range batch {
		if f.Outcome != domain.OutcomeSuspended {
			rest, at = append(rest, f), append(at, i)
		} else {
			suspended, sat = append(suspended, f), append(sat, i)
		}
	}
	moved, err := s.finishSuspended(ctx, suspended)
	if err != nil {
		return nil, nil, err
	}
	var written, cancelled []domain.Moved
	for k, m := range moved {
		finished[sat[k]] = m
		if !m.LeaseLost() {
			written = append(written, m)
		}
		if m.Status == jobs.StateCancelled { // cancelled while it ran: so are the jobs downstream
			cancelled = append(cancelled, m)
		}
	}
	s.publish(nil, written)
	for _, m := range cancelled {
		down, err := cascade(ctx, s.pool, []uuid.UUID{m.JobID})
		if err != nil {
			return nil, nil, err
		}
		s.emitMoved(down)
		cascaded = append(cascaded, down...)
	}
	if len(rest) > 0 {
		done, more, err := s.FinishJobs(ctx, rest)
		if err != nil {
			return nil, nil, err
		}
		for k, i := range at {
			finished[i] = done[k]
		}
		cascaded = append(cascaded, more...)
	}
	return finished, cascaded, nil
}

// hasSuspended reports whether batch holds a suspended outcome.
func hasSuspended(batch []domain.Finish) bool {
	for i := range batch {
		if batch[i].Outcome == domain.OutcomeSuspended {
			return true
		}
	}
	return false
}

// eventSQL delivers event $1 (body $3, id $2) to every job waiting for it
// and queues them, in id order (two events lock their jobs in the same
// order).
const eventSQL = `
WITH w AS MATERIALIZED (
	SELECT id FROM jobs
	WHERE status = 'waiting' AND wait_kind = 'event' AND wait_name = $1 AND deleted_at IS NULL
	  AND ($4::text[] IS NULL OR queue = ANY($4::text[]))
	ORDER BY id
	FOR NO KEY UPDATE
),
kept AS (
	INSERT INTO job_signals (job_id, name, dedupe_id, kind, body)
	SELECT id, $1, $2, 'event', $3::jsonb FROM w
	ON CONFLICT (job_id, name, dedupe_id) DO NOTHING
),
moved AS (
	UPDATE jobs j SET status = 'queued', run_at = now(), wait_kind = NULL, wait_name = NULL, updated_at = now()
	FROM w WHERE j.id = w.id
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.effective_priority, j.run_at, j.created_at, j.batch_id
)
SELECT ` + movedColumns + ` FROM moved`

// SendEvent delivers event name, with body, to every job waiting for it
// now (in queues, when not nil), and returns how many it resumed.
func (s *Store) SendEvent(ctx context.Context, name string, body []byte, queues []string) (int, error) {
	if len(body) == 0 {
		body = []byte("null")
	}
	moved, err := collectMoved(s.pool.Query(ctx, eventSQL, name, uuid.NewString(), string(body), queues))
	if err != nil {
		return 0, fmt.Errorf("send event: %w", err)
	}
	s.publish(nil, moved)
	return len(moved), nil
}
