package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Steps (job_steps) and signals (job_signals) of durable jobs; see the
// durable_steps migration.

// stepLockSQL takes the job's row lock for a write fenced by the lease:
// no row means the lease is gone. The statements after it in the same
// implicit transaction see every write committed before the lock (each
// statement takes a fresh snapshot), so two records of one job never read
// the same step count, and a reaper or a finish that moved the job first
// makes this write refuse.
const stepLockSQL = `SELECT attempt FROM jobs WHERE id = $1 AND lease_token = $2 FOR NO KEY UPDATE`

// stepInsertSQL records a step if the lease still holds and the name is
// new to the job, numbering it after the job's steps.
const stepInsertSQL = `
INSERT INTO job_steps (job_id, name, seq, attempt, result, started_at)
SELECT j.id, $3, coalesce((SELECT max(seq) FROM job_steps WHERE job_id = $1), 0) + 1, j.attempt, $4::jsonb, $5
FROM jobs j WHERE j.id = $1 AND j.lease_token = $2
ON CONFLICT (job_id, name) DO NOTHING`

// stepDurableSQL flags the job durable (its claims read its steps) the
// first time; afterwards it matches no row and writes nothing.
const stepDurableSQL = `UPDATE jobs SET durable = true WHERE id = $1 AND lease_token = $2 AND NOT durable`

// stepReadSQL reads the step as recorded (just now, or before).
const stepReadSQL = `SELECT name, seq, attempt, result, started_at, recorded_at FROM job_steps WHERE job_id = $1 AND name = $2`

// RecordStep records a step of the job whose lease is l, once: the step
// as stored is returned with recorded true when this call wrote it, false
// when the job had a step of that name already (its record is returned,
// unchanged). domain.ErrLeaseLost when l no longer holds the job: nothing
// is written.
// The step is numbered after the job's steps (step.Seq is not read), in
// one round trip and one transaction of its own: this is a pull worker's
// record, through the API. In-process workers number their steps and
// record them with CommitStep, which shares commits.
func (s *Store) RecordStep(ctx context.Context, l domain.Lease, step jobs.StepRecord) (jobs.StepRecord, bool, error) {
	result := step.Result
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if step.StartedAt.IsZero() {
		step.StartedAt = time.Now()
	}
	b := &pgx.Batch{}
	b.Queue(stepLockSQL, l.JobID, l.Token)
	b.Queue(stepInsertSQL, l.JobID, l.Token, step.Name, string(result), step.StartedAt)
	b.Queue(stepDurableSQL, l.JobID, l.Token)
	b.Queue(stepReadSQL, l.JobID, step.Name)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var attempt int
	if err := br.QueryRow().Scan(&attempt); errors.Is(err, pgx.ErrNoRows) {
		return jobs.StepRecord{}, false, domain.ErrLeaseLost
	} else if err != nil {
		return jobs.StepRecord{}, false, fmt.Errorf("record step: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return jobs.StepRecord{}, false, fmt.Errorf("record step: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return jobs.StepRecord{}, false, fmt.Errorf("record step: %w", err)
	}
	var got jobs.StepRecord
	if err := br.QueryRow().Scan(&got.Name, &got.Seq, &got.Attempt, &got.Result, &got.StartedAt, &got.RecordedAt); err != nil {
		return jobs.StepRecord{}, false, fmt.Errorf("record step: read back: %w", err)
	}
	if err := br.Close(); err != nil {
		return jobs.StepRecord{}, false, fmt.Errorf("record step: %w", err)
	}
	return got, tag.RowsAffected() == 1, nil
}

// stepsSQL is a job's recorded steps in their order.
const stepsSQL = `SELECT name, seq, attempt, result, started_at, recorded_at FROM job_steps WHERE job_id = $1 ORDER BY seq`

// JobSteps returns the steps job id recorded, in their order.
func (s *Store) JobSteps(ctx context.Context, id uuid.UUID) ([]jobs.StepRecord, error) {
	rows, err := s.pool.Query(ctx, stepsSQL, id)
	if err != nil {
		return nil, fmt.Errorf("read steps: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobs.StepRecord, error) {
		var st jobs.StepRecord
		err := r.Scan(&st.Name, &st.Seq, &st.Attempt, &st.Result, &st.StartedAt, &st.RecordedAt)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("read steps: %w", err)
	}
	return out, nil
}

// claimedStepsSQL and claimedSignalsSQL are what a claim of a durable job
// j carries: its steps in order, and the first signal (or timeout) of each
// name.
const claimedStepsSQL = `(
	SELECT jsonb_agg(jsonb_build_object('name', st.name, 'seq', st.seq, 'attempt', st.attempt, 'result', st.result,
	                                    'started_at', st.started_at, 'recorded_at', st.recorded_at) ORDER BY st.seq)
	FROM job_steps st WHERE st.job_id = j.id)`

const claimedSignalsSQL = `(
	SELECT jsonb_object_agg(sg.name, CASE WHEN sg.kind = 'timeout' THEN '{"timed_out": true}'::jsonb
	                                      ELSE jsonb_build_object('body', sg.body, 'at', sg.received_at) END)
	FROM (SELECT DISTINCT ON (name) name, kind, body, received_at FROM job_signals
	      WHERE job_id = j.id ORDER BY name, received_at, dedupe_id) sg)`

// readDurable fills in a claimed job's steps and signals from the claim's
// JSON columns.
func readDurable(j *jobs.Job, steps, signals []byte) error {
	if !j.Durable {
		return nil
	}
	j.Steps, j.Signals = []jobs.StepRecord{}, map[string]jobs.Signal{}
	if steps != nil {
		if err := json.Unmarshal(steps, &j.Steps); err != nil {
			return fmt.Errorf("read steps of job %s: %w", j.ID, err)
		}
	}
	if signals != nil {
		if err := json.Unmarshal(signals, &j.Signals); err != nil {
			return fmt.Errorf("read signals of job %s: %w", j.ID, err)
		}
	}
	return nil
}

// forgetStepsSQL drops what a dead-letter job recorded (its steps and
// signals), so that its replay starts over; any other job keeps them.
const forgetStepsSQL = `
WITH dead AS (SELECT id FROM jobs WHERE id = $1 AND status = 'dead_letter' AND durable),
s AS (DELETE FROM job_steps WHERE job_id IN (SELECT id FROM dead))
DELETE FROM job_signals WHERE job_id IN (SELECT id FROM dead)`

// ForgetSteps drops the recorded steps and signals of job id if it is in
// the dead-letter queue (a replay that starts over); for a job in any
// other state it does nothing.
func (s *Store) ForgetSteps(ctx context.Context, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, forgetStepsSQL, id); err != nil {
		return fmt.Errorf("forget steps: %w", err)
	}
	return nil
}
