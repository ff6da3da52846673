package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Group commit for step records.
//
// A handler's step must be durable before the handler goes on, so a step
// written in a transaction of its own costs a commit and its WAL flush,
// and with many handlers at work the flushes, not the rows, set the rate.
// So a step that its worker has numbered (jobs.Step does: the attempt
// knows how far it has gone) goes to the step committer, which writes the
// steps of every handler that records one at about the same moment as
// one statement in one transaction, and answers each handler once that
// transaction has committed. Batches form as the enqueue group commit's
// do (groupcommit.go): with nothing being written a step goes at once with
// whatever else waits; while a batch is written the next one gathers for
// up to StepWindow.
//
// The statement (stepBatchSQL) locks the jobs rows of the batch by id, in
// id order, keeps the rows whose lease token is the one each step came
// with (the fence: a reaper or a finish that moved the job first changed
// the token, and the lock waits for it), inserts those steps, flags their
// jobs durable the first time, and says for each step whether its lease
// held and whether it was inserted. So a step costs one statement (shared),
// no read of its own, and a share of one commit. A step whose name the job
// recorded already (never from a worker that read its steps with its
// claim, whose steps are the job's) is then read back on its own. The
// attempt's start, when its worker has not written it yet, rides along
// (see stepBatchSQL).
//
// One caller's step never fails its neighbours: when the database refuses
// the batch for its data, each step is written again on its own.

const (
	// StepWindow is how long a batch of steps gathers while another
	// batch is being written.
	StepWindow = time.Millisecond
	// stepBatchMax is the most steps one statement records.
	stepBatchMax = 1000
	// stepFlushers is how many batches may be written at once. Two did
	// better than four on two busy cores: fewer, larger statements spend
	// less of PostgreSQL's CPU per step, and one batch gathers while the
	// other waits for its WAL flush.
	stepFlushers = 2
)

// stepBatchSQL records a batch of numbered steps (see above). A step may
// carry its attempt's start, when its worker has not written it yet: the
// update that flags the job durable writes it too (as Store.StartJobs
// would), so the start and the step do not lock the row in turn. Its
// answer has one row per input step, by ordinal: the attempt when the
// lease held (NULL when not), when the step was recorded (NULL when it
// was not inserted), and whether this statement wrote the job's start,
// with what its running event needs.
const stepBatchSQL = `
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::integer[], $5::text[], $6::timestamptz[], $7::timestamptz[])
	     WITH ORDINALITY AS i(job_id, token, name, seq, result, started_at, start, ord)
),
held AS (
	SELECT j.id, j.lease_token, j.attempt, j.durable, j.started_at FROM jobs j
	WHERE j.id = ANY($1::uuid[]) ORDER BY j.id FOR NO KEY UPDATE
),
fenced AS (
	SELECT i.*, h.attempt, h.durable, h.started_at IS NULL AND i.start IS NOT NULL AS starts
	FROM input i JOIN held h ON h.id = i.job_id AND h.lease_token = i.token
),
ins AS (
	INSERT INTO job_steps (job_id, name, seq, attempt, result, started_at)
	SELECT job_id, name, seq, attempt, result::jsonb, started_at FROM fenced
	ON CONFLICT (job_id, name) DO NOTHING
	RETURNING job_id, name, recorded_at
),
moved AS (
	UPDATE jobs j SET durable = true,
		started_at = CASE WHEN f.starts THEN coalesce(j.started_at, least(f.start, now())) ELSE j.started_at END
	FROM (SELECT DISTINCT ON (job_id) job_id, start, starts FROM fenced
	      WHERE NOT durable OR starts ORDER BY job_id, starts DESC) f
	WHERE j.id = f.job_id
	RETURNING j.id, j.type, j.queue, j.batch_id, f.starts
)
SELECT i.ord, f.attempt, ins.recorded_at, m.starts IS TRUE, coalesce(m.type, ''), coalesce(m.queue, ''), m.batch_id
FROM input i
LEFT JOIN fenced f ON f.ord = i.ord
LEFT JOIN ins ON f.ord IS NOT NULL AND ins.job_id = i.job_id AND ins.name = i.name
LEFT JOIN moved m ON f.ord IS NOT NULL AND m.id = i.job_id
ORDER BY i.ord`

// stepRequest is one handler's step.
type stepRequest struct {
	lease domain.Lease
	step  jobs.StepRecord
	start *time.Time // the attempt's start to write with the step, if not written
}

type stepAnswer struct {
	rec   jobs.StepRecord
	fresh bool // this call inserted it
	err   error
}

// stepKey is what a batch of steps holds once: a job's step of one name.
type stepKey struct {
	job  uuid.UUID
	name string
}

// newStepCommitter gathers s's numbered step records into batches.
func newStepCommitter(s *Store) *committer[stepRequest, stepAnswer, stepKey] {
	return &committer[stepRequest, stepAnswer, stepKey]{
		what: "record step", max: stepBatchMax, window: StepWindow, flushers: stepFlushers,
		key:   func(r stepRequest) stepKey { return stepKey{r.lease.JobID, r.step.Name} },
		write: s.writeSteps,
		fail:  func(err error) stepAnswer { return stepAnswer{err: err} },
	}
}

// writeSteps records batch in one statement and returns each step's
// answer.
func (s *Store) writeSteps(ctx context.Context, batch []stepRequest) ([]stepAnswer, error) {
	n := len(batch)
	ids, tokens := make([]uuid.UUID, n), make([]uuid.UUID, n)
	names, results := make([]string, n), make([]string, n)
	seqs, started, starts := make([]int32, n), make([]time.Time, n), make([]*time.Time, n)
	for i, r := range batch {
		ids[i], tokens[i], names[i], seqs[i], started[i] = r.lease.JobID, r.lease.Token, r.step.Name, int32(r.step.Seq), r.step.StartedAt
		results[i], starts[i] = string(r.step.Result), r.start
	}
	out := make([]stepAnswer, n)
	var reread []int
	var fresh uint64
	var events []domain.Event
	err := retryDeadlocks(func() error {
		reread, fresh, events = reread[:0], 0, events[:0]
		rows, err := s.pool.Query(ctx, stepBatchSQL, ids, tokens, names, seqs, results, started, starts)
		if err != nil {
			return err
		}
		defer rows.Close()
		now := time.Now()
		for rows.Next() {
			var ord int
			var attempt *int
			var recorded *time.Time
			var startWritten bool
			ev := domain.Event{Status: jobs.StateRunning, At: now}
			if err := rows.Scan(&ord, &attempt, &recorded, &startWritten, &ev.Type, &ev.Queue, &ev.BatchID); err != nil {
				return err
			}
			i := ord - 1
			if startWritten && batch[i].start != nil {
				ev.JobID, ev.Attempt = ids[i], *attempt
				events = append(events, ev)
			}
			switch {
			case attempt == nil:
				out[i] = stepAnswer{err: domain.ErrLeaseLost}
			case recorded == nil:
				reread = append(reread, i)
			default:
				rec := batch[i].step
				rec.Attempt, rec.RecordedAt = *attempt, *recorded
				out[i] = stepAnswer{rec: rec, fresh: true}
				fresh++
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("record step: %w", err)
	}
	s.stepsRecorded.Add(fresh)
	if len(events) > 0 && s.events != nil {
		s.events.Publish(events)
	}
	for _, i := range reread {
		rec, err := s.readStep(ctx, ids[i], names[i])
		out[i] = stepAnswer{rec: rec, err: err}
	}
	return out, nil
}

// readStep reads a step as recorded.
func (s *Store) readStep(ctx context.Context, id uuid.UUID, name string) (jobs.StepRecord, error) {
	var got jobs.StepRecord
	err := s.pool.QueryRow(ctx, stepReadSQL, id, name).Scan(&got.Name, &got.Seq, &got.Attempt, &got.Result, &got.StartedAt, &got.RecordedAt)
	if err != nil {
		return jobs.StepRecord{}, fmt.Errorf("record step: read back: %w", err)
	}
	return got, nil
}

// StepCommits returns how many statements the step committer wrote and
// how many steps they recorded.
func (s *Store) StepCommits() (batches, steps uint64) {
	return s.steps.batches.Load(), s.stepsRecorded.Load()
}

// CommitStep records a step of the job whose lease is l that its worker
// numbered (step.Seq > 0, as jobs.Step numbers them), in one statement
// and one commit shared with the steps other handlers record at the same
// moment (see above), and answers once that commit is done: the step as
// stored, with fresh true when this call wrote it, false when the job had
// a step of that name already (its record is returned, unchanged).
// domain.ErrLeaseLost when l no longer holds the job: nothing is written.
// start, when not nil, is the attempt's start not written yet (see
// Store.StartJobs): it is written with the step, unless the lease is lost
// or the call fails.
func (s *Store) CommitStep(ctx context.Context, l domain.Lease, step jobs.StepRecord, start *time.Time) (rec jobs.StepRecord, fresh bool, err error) {
	if step.Seq <= 0 {
		return jobs.StepRecord{}, false, fmt.Errorf("record step %q: no step number", step.Name)
	}
	if len(step.Result) == 0 {
		step.Result = json.RawMessage("null")
	}
	if step.StartedAt.IsZero() {
		step.StartedAt = time.Now()
	}
	a := s.steps.submit(ctx, stepRequest{lease: l, step: step, start: start})
	return a.rec, a.fresh, a.err
}
