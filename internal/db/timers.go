package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The scheduler's index: the scheduled and waiting jobs, with their times.

const timersSQL = `
SELECT id, effective_priority, run_at, created_at FROM jobs
WHERE status IN ('scheduled', 'waiting') AND deleted_at IS NULL AND id = ANY($1::uuid[])`

// timerPageSQL pages by id through the live jobs in one state, with what
// the scheduler's index and the ready queue need. The state is part of the
// text, not a parameter, so the planner picks the state's partial index.
func timerPageSQL(state jobs.State) string {
	return `
SELECT id, effective_priority, run_at, created_at FROM jobs
WHERE status = '` + string(state) + `' AND deleted_at IS NULL AND id > $1
ORDER BY id
LIMIT $2`
}

// allTimersSQL pages through the scheduled and the waiting jobs (each
// state by its partial index) in one id order.
var allTimersSQL = `(` + timerPageSQL(jobs.StateScheduled) + `) UNION ALL (` + timerPageSQL(jobs.StateWaiting) + `)
ORDER BY id LIMIT $2`

// ScheduledTimers returns, for the given ids (all scheduled jobs when ids
// is nil, a page at a time after the id `after`), the jobs that are still
// scheduled, with what the in-memory index needs.
func (s *Store) ScheduledTimers(ctx context.Context, ids []uuid.UUID, after uuid.UUID, limit int) ([]domain.Timer, error) {
	var rows pgx.Rows
	var err error
	if ids != nil {
		rows, err = s.pool.Query(ctx, timersSQL, ids)
	} else {
		rows, err = s.pool.Query(ctx, allTimersSQL, after, limit)
	}
	out, err := collectTimers(rows, err)
	if err != nil {
		return nil, fmt.Errorf("read scheduled jobs: %w", err)
	}
	return out, nil
}

func collectTimers(rows pgx.Rows, err error) ([]domain.Timer, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Timer, error) {
		var t domain.Timer
		err := r.Scan(&t.ID, &t.Priority, &t.RunAt, &t.CreatedAt)
		return t, err
	})
}
