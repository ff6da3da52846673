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

// Suspensions are written three statements to a batch, whatever its
// size, in one round trip and one transaction (a pipeline): the jobs'
// row locks in id order (suspendLockSQL), the sleeps' steps
// (suspendStepsSQL) and the waits (suspendSQL), each over parallel
// arrays. Written a job at a time, as they first were, a finish of 1,000
// sleepers ran 3,000 statements, each planned afresh, and took a second
// and more, long enough to hold the pool's claims back and make the
// sleepers that followed fall asleep, and so wake, in one burst.

// suspendLockSQL takes the row locks of the jobs whose leases still hold,
// in id order (as every batch writer takes them).
const suspendLockSQL = `
SELECT j.id FROM unnest($1::uuid[], $2::uuid[]) AS i(id, token)
JOIN jobs j ON j.id = i.id AND j.lease_token = i.token
ORDER BY j.id
FOR NO KEY UPDATE OF j`

// suspendStepsSQL records the sleeps' steps (as stepInsertSQL does one):
// once per name, numbered after the job's steps, for the jobs whose
// leases still hold.
const suspendStepsSQL = `
INSERT INTO job_steps (job_id, name, seq, attempt, result, started_at)
SELECT j.id, i.name, coalesce((SELECT max(seq) FROM job_steps s WHERE s.job_id = j.id), 0) + 1, j.attempt, i.result::jsonb, i.started
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[]) AS i(id, token, name, result, started)
JOIN jobs j ON j.id = i.id AND j.lease_token = i.token
ORDER BY j.id
ON CONFLICT (job_id, name) DO NOTHING`

// suspendSQL ends attempts that sleep or wait: each job waits until its
// until, unless what it waits for is already there (a signal kept for
// it, a wake time passed), in which case it is queued at once. The
// attempt is refunded, as the wait is no failure, and the run is recorded
// as suspended. A job whose cancellation was asked while it ran is
// cancelled instead (its downstream jobs with it, by the caller). A sleep
// without a name (a pull worker's: it recorded its sleep as a step just
// before) is named after the job's last step. A claimed job whose handler
// suspended before its start was written carries the start
// (domain.Finish.StartedAt), as finishSQL's outcomes do.
const suspendSQL = `
WITH s AS (
	SELECT i.*, i.until <= now()
	    OR (i.kind <> 'sleep' AND EXISTS (SELECT 1 FROM job_signals g WHERE g.job_id = i.id AND g.name = i.name)) AS ready
	FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::timestamptz[])
	     AS i(id, token, kind, name, until, reason, started)
),
moved AS (
	UPDATE jobs j SET
		status = CASE WHEN j.cancel_requested THEN 'cancelled' WHEN s.ready THEN 'queued' ELSE 'waiting' END,
		wait_kind = CASE WHEN s.ready OR j.cancel_requested THEN NULL ELSE s.kind END,
		wait_name = CASE WHEN s.ready OR j.cancel_requested THEN NULL
		                 ELSE coalesce(nullif(s.name, ''), (SELECT name FROM job_steps WHERE job_id = j.id ORDER BY seq DESC LIMIT 1), 'sleep') END,
		run_at = CASE WHEN s.ready OR j.cancel_requested THEN now() ELSE s.until END,
		finished_at = CASE WHEN j.cancel_requested THEN now() ELSE j.finished_at END,
		attempt = j.attempt - 1,
		durable = true,
		started_at = coalesce(j.started_at, least(s.started, now())),
		lease_token = NULL,
		lease_expires_at = NULL,
		updated_at = now()
	FROM s
	WHERE j.id = s.id AND j.lease_token = s.token
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.executions, j.worker_id, j.started_at,
	          j.run_at, j.effective_priority, j.created_at, j.batch_id, s.reason
),
recorded AS (
	INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
	SELECT id, executions, attempt + 1, worker_id, coalesce(started_at, now()), now(), 'suspended', reason,
	       greatest(0, (extract(epoch FROM now() - started_at) * 1000)::bigint)
	FROM moved
)
SELECT ` + movedColumns + ` FROM moved`

// finishSuspended writes suspended outcomes (domain.OutcomeSuspended): for
// each, the sleep's step, if it has one, and the wait, fenced by the
// lease; all of them in one round trip and one transaction. A lost lease
// gives a Moved without status. When the database refuses the batch,
// each is written on its own, so that only the one at fault fails.
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

// suspendInput is a batch of suspended outcomes laid out as the
// parallel arrays of suspendLockSQL, suspendStepsSQL and suspendSQL.
type suspendInput struct {
	ids, tokens           []uuid.UUID
	kinds, names          []string
	until                 []time.Time
	started               []*time.Time
	reasons               []string
	stepIDs, stepTokens   []uuid.UUID
	stepNames, stepBodies []string
	stepStarted           []time.Time
}

func newSuspendInput(fs []domain.Finish) suspendInput {
	n := len(fs)
	in := suspendInput{ids: make([]uuid.UUID, n), tokens: make([]uuid.UUID, n), kinds: make([]string, n),
		names: make([]string, n), until: make([]time.Time, n), started: make([]*time.Time, n), reasons: make([]string, n)}
	for i, f := range fs {
		w := f.Wait
		in.ids[i], in.tokens[i], in.kinds[i], in.names[i], in.started[i] = f.JobID, f.Token, string(w.Kind), w.Name, f.StartedAt
		in.until[i] = w.Until
		in.reasons[i] = fmt.Sprintf("waits for %s %q until %s", w.Kind, w.Name, w.Until.UTC().Format(time.RFC3339))
		if w.Name == "" {
			in.reasons[i] = "sleeps until " + w.Until.UTC().Format(time.RFC3339)
		}
		if st := f.Step; st != nil {
			in.stepIDs, in.stepTokens = append(in.stepIDs, f.JobID), append(in.stepTokens, f.Token)
			in.stepNames, in.stepBodies = append(in.stepNames, st.Name), append(in.stepBodies, string(st.Result))
			in.stepStarted = append(in.stepStarted, st.StartedAt)
		}
	}
	return in
}

// finishSuspendedTx is finishSuspended's pipeline.
func (s *Store) finishSuspendedTx(ctx context.Context, fs []domain.Finish) ([]domain.Moved, error) {
	in := newSuspendInput(fs)
	b := &pgx.Batch{}
	b.Queue(suspendLockSQL, in.ids, in.tokens)
	if len(in.stepIDs) > 0 {
		b.Queue(suspendStepsSQL, in.stepIDs, in.stepTokens, in.stepNames, in.stepBodies, in.stepStarted)
	}
	b.Queue(suspendSQL, in.ids, in.tokens, in.kinds, in.names, in.until, in.reasons, in.started)
	var moved []domain.Moved
	err := retryDeadlocks(func() error {
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("suspend jobs: %w", err)
		}
		if len(in.stepIDs) > 0 {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("suspend jobs: record their steps: %w", err)
			}
		}
		var err error
		if moved, err = collectMoved(br.Query()); err != nil {
			return fmt.Errorf("suspend jobs: %w", err)
		}
		return br.Close()
	})
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]domain.Moved, len(moved))
	for _, m := range moved {
		byID[m.JobID] = m
	}
	out := make([]domain.Moved, len(fs))
	for i, f := range fs {
		if m, ok := byID[f.JobID]; ok {
			out[i] = m
			delete(byID, f.JobID) // the same lease twice: the second wrote nothing
		} else {
			out[i] = domain.Moved{JobID: f.JobID}
		}
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
