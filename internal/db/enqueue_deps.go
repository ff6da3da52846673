package db

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// lockDependenciesSQL reads the dependencies of new jobs, holding them so
// that none can complete between this read and the commit: a dependency
// that completes afterwards finds the new edge and releases the job.
const lockDependenciesSQL = `SELECT id, status, deleted_at IS NOT NULL FROM jobs WHERE id = ANY($1::uuid[]) FOR SHARE`

// resolveDependencies checks the dependencies that are not in this batch
// (they must exist, sit outside the bin and be able to complete) and marks
// each new job blocked unless every dependency has completed already.
func resolveDependencies(ctx context.Context, q DBTX, params []jobs.EnqueueParams, ids []uuid.UUID, blocked []bool) error {
	inBatch := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		inBatch[id] = true
	}
	var external []uuid.UUID
	seen := map[uuid.UUID]bool{}
	for i := range params {
		for _, d := range params[i].DependsOn {
			if !inBatch[d] && !seen[d] {
				seen[d] = true // a fan-out names its spawner thousands of times
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

// insertScheduleSQL creates a recurring series with its first firing
// time ($11).
const insertScheduleSQL = `
INSERT INTO job_schedules (id, type, queue, payload, priority, max_retries, timeout_seconds,
                           interval_seconds, cron, timezone, next_run_at, concurrency_key)
VALUES ($1, $2, $3, $4::jsonb, $5, $6, nullif($7, 0), nullif($8, 0), nullif($9, ''), $10, $11, nullif($12, ''))`

// keyExistsSQL says whether a job, live or in the history, holds
// idempotency key $1.
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
		retries := domain.DefaultMaxRetries
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

// insertEdgesSQL records dependency edges (job, the job it waits for) of
// jobs this transaction created, so none of them exists yet; insertEdges
// drops repeats, so there is no conflict to look for.
const insertEdgesSQL = `
INSERT INTO job_dependencies (job_id, depends_on_id) SELECT * FROM unnest($1::uuid[], $2::uuid[])`

// insertEdges records the dependencies of the jobs that were inserted, then
// releases any whose dependencies turned out to be complete already (a
// dependency in the same batch matched an existing, completed job by its
// idempotency key). A job's dependency on its spawner, where reads says
// the step row records it (readsSpawner), is left out.
func insertEdges(ctx context.Context, q DBTX, params []jobs.EnqueueParams, out []jobs.Enqueued, actual map[uuid.UUID]uuid.UUID, reads []bool) error {
	var children, parents, standIns []uuid.UUID
	var blockedKids []uuid.UUID
	for i := range params {
		if !out[i].Inserted || len(params[i].DependsOn) == 0 {
			continue
		}
		first := len(parents)
		var seen map[uuid.UUID]bool // for long lists; short ones are searched
		if len(params[i].DependsOn) > 32 {
			seen = make(map[uuid.UUID]bool, len(params[i].DependsOn))
		}
		for _, d := range params[i].DependsOn {
			if reads != nil && reads[i] && d == params[i].SpawnedBy {
				continue // the spawner: its step row says so (insertSteps)
			}
			if a, ok := actual[d]; ok && a != d {
				d = a
				standIns = append(standIns, a) // an existing job, perhaps in the history
			}
			// Named twice, or two requests that matched one job: one edge.
			if seen != nil && seen[d] || seen == nil && slices.Contains(parents[first:], d) {
				continue
			}
			if seen != nil {
				seen[d] = true
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

// readsSpawner tells, for each request, whether the job it inserted
// depends on the job that spawned it, which completed in this very
// transaction (the job is not blocked, so every dependency has completed):
// that edge orders nothing, and the job's step row records it
// (workflow_steps.reads_spawner) in place of a job_dependencies row, the
// largest part of a fan-out's cost after the jobs themselves. Readers of
// a job's parents take both (parentSourcesSQL).
func readsSpawner(params []jobs.EnqueueParams, out []jobs.Enqueued) []bool {
	var reads []bool
	for i := range params {
		p := &params[i]
		if p.SpawnedBy == uuid.Nil || p.StepKey == "" || !out[i].Inserted || out[i].Job.Status == jobs.StateBlocked {
			continue
		}
		if slices.Contains(p.DependsOn, p.SpawnedBy) {
			if reads == nil {
				reads = make([]bool, len(params))
			}
			reads[i] = true
		}
	}
	return reads
}
