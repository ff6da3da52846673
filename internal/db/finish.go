package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// finishSQL ends a batch of attempts in one statement. Each row is guarded by
// its lease token, so a worker whose lease expired (reaped, maybe re-claimed
// by another worker) writes nothing. Only a running job holds a token
// (jobs_running_holds_lease, jobs_lease_whole), so the token match is the
// running guard as well. No condition on the jobs row alone may join it:
// while a backlog drains the statistics say almost nothing runs, and the
// planner then scans jobs for that condition and compares every row found
// with every input row (a second for 1,000 outcomes) instead of looking
// each input up by id. For each row
// it moves the job, records the execution, stores the log lines that came
// with the outcome (see domain.Finish.Log; a lost lease stores none here),
// and counts throughput. An outcome of a buffered claim whose start was
// not written yet carries the start (started_at); one handed back before
// it started leaves started_at NULL and records a run of no length. The
// moves:
//
//	succeeded                      → completed
//	cancelled                      → cancelled
//	interrupted (drain)            → queued, attempt refunded (cancelled if a cancel was requested)
//	failed, cancel requested       → cancelled
//	failed, attempt <= max_retries → scheduled at now + delay
//	failed, no retries left        → dead_letter
//	failed for good (Final)        → dead_letter (sent as a negative delay)
const finishSQL = `
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::float8[], $14::timestamptz[], $15::timestamptz[])
	     AS i(id, token, outcome, result, error, delay_ms, started_at, ended_at)
),
moved AS (
	UPDATE jobs j SET
		status = CASE
			WHEN i.outcome = 'succeeded' THEN 'completed'
			WHEN i.outcome = 'cancelled' OR j.cancel_requested THEN 'cancelled'
			WHEN i.outcome = 'interrupted' THEN 'queued'
			WHEN j.attempt > j.max_retries OR i.delay_ms < 0 THEN 'dead_letter'
			ELSE 'scheduled' END,
		attempt = CASE WHEN i.outcome = 'interrupted' THEN j.attempt - 1 ELSE j.attempt END,
		result = CASE WHEN i.outcome = 'succeeded' THEN i.result::jsonb ELSE j.result END,
		last_error = CASE WHEN i.outcome = 'succeeded' THEN j.last_error ELSE i.error END,
		run_at = CASE
			WHEN i.outcome = 'failed' AND NOT j.cancel_requested AND j.attempt <= j.max_retries AND i.delay_ms >= 0
			THEN now() + i.delay_ms * interval '1 millisecond'
			ELSE j.run_at END,
		finished_at = CASE
			WHEN i.outcome IN ('succeeded', 'cancelled') OR j.cancel_requested
			  OR (i.outcome = 'failed' AND (j.attempt > j.max_retries OR i.delay_ms < 0))
			THEN greatest(least(coalesce(i.ended_at, now()), now()), j.started_at, least(i.started_at, now()))
			ELSE NULL END,
		started_at = coalesce(j.started_at, least(i.started_at, now())),
		lease_token = NULL,
		lease_expires_at = NULL,
		updated_at = now()
	FROM input i
	WHERE j.id = i.id AND j.lease_token = i.token
	RETURNING j.id, j.status, j.type, j.queue, j.attempt, j.executions, j.worker_id, j.started_at, i.outcome, i.error, i.token,
	          j.run_at, j.effective_priority, j.created_at, j.batch_id,
	          greatest(least(coalesce(i.ended_at, now()), now()), j.started_at) AS ended_at
),
logged AS (
	INSERT INTO job_logs (job_id, attempt, at, level, message, attrs)
	SELECT l.job_id, l.attempt, l.at, l.level, l.message, l.attrs::jsonb
	FROM unnest($7::uuid[], $8::uuid[], $9::integer[], $10::timestamptz[], $11::text[], $12::text[], $13::text[])
	     WITH ORDINALITY AS l(job_id, token, attempt, at, level, message, attrs, ord)
	JOIN moved m ON m.id = l.job_id AND m.token = l.token
	ORDER BY l.ord
),
recorded AS (
	INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
	SELECT id, executions, CASE WHEN outcome = 'interrupted' THEN attempt + 1 ELSE attempt END,
	       worker_id, coalesce(started_at, ended_at), ended_at, outcome, error,
	       greatest(0, (extract(epoch FROM ended_at - started_at) * 1000)::bigint)
	FROM moved
),
counted AS (
	INSERT INTO job_throughput (bucket, outcome, type, queue, shard, n)
	SELECT date_trunc('minute', now()), outcome, type, queue, pg_backend_pid() % 16, count(*) FROM moved GROUP BY outcome, type, queue
	ON CONFLICT (bucket, outcome, type, queue, shard) DO UPDATE SET n = job_throughput.n + excluded.n
)
SELECT ` + movedColumns + `, moved.token FROM moved`

// FinishJobs records the end of a batch of attempts. finished has one entry
// per input, in order; entries whose lease was lost have an empty Status.
// cascaded lists the other jobs that moved as a consequence: dependents
// released because their last dependency completed, and downstream jobs
// cancelled because a dependency failed for good or was cancelled.
//
// It is one round trip: the outcome statement, then (in the same implicit
// transaction, each with a fresh snapshot) the dependency release and the
// cascade.
//
// A batch the database refuses for its data (an outcome no check caught)
// is written again one outcome at a time, so the outcome at fault never
// fails or re-runs its neighbours; that outcome is then written as a
// failure that says why (finishRefused).
func (s *Store) FinishJobs(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error) {
	if len(batch) == 0 {
		return nil, nil, nil
	}
	if hasSuspended(batch) {
		return s.finishWithSuspended(ctx, batch)
	}
	if plain, spawning := splitSpawning(batch); len(spawning) > 0 {
		return s.finishWithSpawns(ctx, batch, plain, spawning)
	}
	finished, cascaded, err = s.finishBatch(ctx, batch)
	if err == nil || !isDataError(err) {
		return finished, cascaded, err
	}
	finished = make([]domain.Moved, len(batch))
	cascaded = nil
	for i, f := range batch {
		one, more, err := s.finishBatch(ctx, []domain.Finish{f})
		if err != nil && isDataError(err) {
			one, more, err = s.finishBatch(ctx, []domain.Finish{finishRefused(f, err)})
		}
		if err != nil {
			return nil, nil, err
		}
		finished[i] = one[0]
		cascaded = append(cascaded, more...)
	}
	return finished, cascaded, nil
}

// finishRefused is the outcome written in place of f when the database
// refused f's data: a failure (retried as any failure is) that names the
// reason, without f's result and log lines.
func finishRefused(f domain.Finish, err error) domain.Finish {
	msg := err.Error()
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		msg = pg.Message
	}
	return domain.Finish{Lease: f.Lease, Outcome: domain.OutcomeFailed, RetryDelay: domain.Backoff(1, nil),
		Error: "the outcome (" + string(f.Outcome) + ") could not be stored: " + msg + "; its result and log lines were dropped"}
}

// finishBatch writes batch in one round trip (see FinishJobs).
func (s *Store) finishBatch(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error) {
	err = retryDeadlocks(func() (err error) {
		finished, cascaded, err = s.finishBatchOnce(ctx, batch)
		return err
	})
	return finished, cascaded, err
}

// finishBatchOnce is one attempt of finishBatch.
func (s *Store) finishBatchOnce(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error) {
	in := newFinishInput(batch)
	br := s.pool.SendBatch(ctx, in.batch())
	defer br.Close()

	done, err := readFinished(br, len(batch))
	if err != nil {
		return nil, nil, err
	}
	if cascaded, err = in.readCascaded(br); err != nil {
		return nil, nil, err
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("finish jobs: %w", err)
	}
	finished = make([]domain.Moved, len(batch))
	for i, f := range batch {
		if d, ok := done[f.Lease]; ok {
			finished[i] = d
		} else {
			finished[i] = domain.Moved{JobID: f.JobID}
		}
	}
	s.publish(nil, finished, cascaded)
	return finished, cascaded, nil
}

// finishInput is a batch of outcomes laid out as finishSQL's parallel
// arrays, with the jobs split by what follows them: dependents released
// after a success, downstream jobs cancelled after anything else.
type finishInput struct {
	ids, tokens []uuid.UUID
	outcomes    []string
	results     []*string    // the handler's result, succeeded entries only
	errs        []*string    // the scrubbed, truncated error, other entries only
	delays      []float64    // retry delay in milliseconds; -1 for no retry
	started     []*time.Time // the handler's start not written yet (domain.Finish.StartedAt)
	ended       []*time.Time // when the handler returned (domain.Finish.EndedAt)
	lines       finishLines
	succeeded   []uuid.UUID
	others      []uuid.UUID
}

func newFinishInput(batch []domain.Finish) finishInput {
	batch = inLockOrder(batch, func(f domain.Finish) uuid.UUID { return f.JobID })
	n := len(batch)
	in := finishInput{
		ids:      make([]uuid.UUID, n),
		tokens:   make([]uuid.UUID, n),
		outcomes: make([]string, n),
		results:  make([]*string, n),
		errs:     make([]*string, n),
		delays:   make([]float64, n),
		started:  make([]*time.Time, n),
		ended:    make([]*time.Time, n),
	}
	for i, f := range batch {
		in.ids[i], in.tokens[i] = f.JobID, f.Token
		in.outcomes[i], in.started[i], in.ended[i] = string(f.Outcome), f.StartedAt, f.EndedAt
		if f.Outcome == domain.OutcomeSucceeded {
			in.succeeded = append(in.succeeded, f.JobID)
			if len(f.Result) > 0 {
				r := string(f.Result)
				in.results[i] = &r
			}
		} else {
			in.others = append(in.others, f.JobID)
			e := truncate(logs.Scrub(f.Error), domain.MaxErrorLen)
			in.errs[i] = &e
		}
		in.delays[i] = float64(f.RetryDelay) / float64(time.Millisecond)
		in.lines.add(f)
		if f.Final {
			in.delays[i] = -1 // no retry: see finishSQL
		}
	}
	return in
}

// batch queues the outcome statement, then the dependency release when
// anything succeeded, then the cascade when anything did not: the order
// readFinished and readCascaded read the results in.
func (in finishInput) batch() *pgx.Batch {
	b := &pgx.Batch{}
	l := &in.lines
	b.Queue(finishSQL, in.ids, in.tokens, in.outcomes, in.results, in.errs, in.delays,
		l.jobs, l.tokens, l.attempts, l.ats, l.levels, l.messages, l.attrs, in.started, in.ended)
	if len(in.succeeded) > 0 {
		ok := in.succeeded
		b.Queue(lockChildrenSQL, ok)
		b.Queue(releaseChildrenSQL, ok)
	}
	if len(in.others) > 0 {
		b.Queue(cascadeSQL, in.others)
	}
	return b
}

// readFinished reads finishSQL's rows, keyed by the lease they ended; a
// lease missing from the map was lost before its outcome arrived.
func readFinished(br pgx.BatchResults, n int) (map[domain.Lease]domain.Moved, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	done := make(map[domain.Lease]domain.Moved, n)
	for rows.Next() {
		var f domain.Moved
		var status string
		var token uuid.UUID
		if err := rows.Scan(&f.JobID, &status, &f.Type, &f.Queue, &f.Attempt, &f.EffectivePriority, &f.RunAt, &f.CreatedAt, &f.BatchID, &token); err != nil {
			rows.Close()
			return nil, fmt.Errorf("finish jobs: %w", err)
		}
		f.Status = jobs.State(status)
		done[domain.Lease{JobID: f.JobID, Token: token}] = f
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return done, nil
}

// readCascaded reads what the batch's follow-up statements moved: the
// dependents released, then the downstream jobs cancelled.
func (in finishInput) readCascaded(br pgx.BatchResults) (cascaded []domain.Moved, err error) {
	if len(in.succeeded) > 0 {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("finish jobs: lock dependents: %w", err)
		}
		released, err := collectMoved(br.Query())
		if err != nil {
			return nil, fmt.Errorf("finish jobs: release dependents: %w", err)
		}
		cascaded = append(cascaded, released...)
	}
	if len(in.others) > 0 {
		cancelled, err := collectMoved(br.Query())
		if err != nil {
			return nil, fmt.Errorf("finish jobs: cancel downstream: %w", err)
		}
		cascaded = append(cascaded, cancelled...)
	}
	return cascaded, nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence,
// replaces invalid UTF-8 and drops NUL bytes, none of which PostgreSQL text
// can hold.
func truncate(s string, n int) string {
	return jobs.TruncateBytes(strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD"), n, "… (truncated)")
}

// splitSpawning tells apart the outcomes that spawn jobs (completions with
// Spawn) from the others, by index.
func splitSpawning(batch []domain.Finish) (plain, spawning []int) {
	for i := range batch {
		if batch[i].Outcome == domain.OutcomeSucceeded && len(batch[i].Spawn) > 0 {
			spawning = append(spawning, i)
		} else {
			plain = append(plain, i)
		}
	}
	return plain, spawning
}

// finishWithSpawns is FinishJobs for a batch in which some completions
// spawn jobs: the others are written together, each spawning one in a
// transaction of its own with the jobs it creates (finishSpawning). A
// spawn the store refuses fails its job for good instead, with the
// reason, and creates nothing.
func (s *Store) finishWithSpawns(ctx context.Context, batch []domain.Finish, plain, spawning []int) (finished, cascaded []domain.Moved, err error) {
	finished = make([]domain.Moved, len(batch))
	if len(plain) > 0 {
		rest := make([]domain.Finish, len(plain))
		for k, i := range plain {
			rest[k] = batch[i]
		}
		done, more, err := s.FinishJobs(ctx, rest)
		if err != nil {
			return nil, nil, err
		}
		for k, i := range plain {
			finished[i] = done[k]
		}
		cascaded = append(cascaded, more...)
	}
	for _, i := range spawning {
		f := batch[i]
		m, more, spawned, err := s.finishSpawning(ctx, f)
		var ve *jobs.ValidationError
		if errors.As(err, &ve) || isDataError(err) {
			// Refused (a key the workflow has; data no check caught):
			// the job fails for good with the reason, nothing spawned.
			refused := finishRefused(f, err)
			refused.Spawn, refused.Final = nil, true
			if ve != nil {
				refused.Error, refused.Log = "spawn refused: "+ve.Error(), f.Log
			}
			done, more, err := s.FinishJobs(ctx, []domain.Finish{refused})
			if err != nil {
				return nil, nil, err
			}
			finished[i] = done[0]
			cascaded = append(cascaded, more...)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		finished[i] = m
		cascaded = append(cascaded, more...)
		s.publish(nil, []domain.Moved{m}, more)
		s.Announce(spawned)
	}
	return finished, cascaded, nil
}
