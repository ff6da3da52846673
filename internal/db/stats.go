package db

import (
	"context"
	"fmt"

	"github.com/flinthq/flint/internal/domain"
)

// liveCountsSQL counts the live jobs (queued, blocked, scheduled, waiting,
// claimed or running: see jobs.StateClaimed) per queue, type and state,
// through the status and lease
// indexes; finishedCountsSQL reads the finished jobs' counts, which
// triggers keep in job_counts as rows change (see its migration), so no
// statement here scans the finished jobs however many there are.
const liveCountsSQL = `
SELECT queue, type, status, count(*) AS n FROM jobs
WHERE status IN ('blocked', 'scheduled', 'queued', 'waiting') AND status <> 'running' AND deleted_at IS NULL
GROUP BY queue, type, status
UNION ALL
SELECT queue, type, CASE WHEN started_at IS NULL THEN 'claimed' ELSE 'running' END, count(*) FROM jobs
WHERE status = 'running' AND deleted_at IS NULL
GROUP BY 1, 2, 3`

const finishedCountsSQL = `
SELECT queue, type, status, sum(n)::bigint AS n FROM job_counts WHERE NOT in_bin
GROUP BY queue, type, status HAVING sum(n) <> 0`

const statsByQueueTypeSQL = liveCountsSQL + `
UNION ALL` + finishedCountsSQL

// queueTypeCountRow counts the live jobs of one queue, type and state.
type queueTypeCountRow struct {
	Queue  string `db:"queue"`
	Type   string `db:"type"`
	Status string `db:"status"`
	N      int64  `db:"n"`
}

const binCountSQL = `SELECT coalesce(sum(n), 0)::bigint FROM job_counts WHERE in_bin`

// Stats counts jobs per state, queue and type, and reads the last hour of
// throughput. The counts read the live jobs through their indexes and the
// finished ones from job_counts; callers that poll it should still cache
// the result for a second or two.
func (s *Store) Stats(ctx context.Context) (*domain.Stats, error) {
	st := &domain.Stats{
		ByStatus: map[string]int64{},
		ByQueue:  map[string]map[string]int64{},
		ByType:   map[string]map[string]int64{},
	}
	var rows []queueTypeCountRow
	if err := s.sqlx.SelectContext(ctx, &rows, statsByQueueTypeSQL); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for _, r := range rows {
		st.ByStatus[r.Status] += r.N
		if st.ByQueue[r.Queue] == nil {
			st.ByQueue[r.Queue] = map[string]int64{}
		}
		st.ByQueue[r.Queue][r.Status] += r.N
		if st.ByType[r.Type] == nil {
			st.ByType[r.Type] = map[string]int64{}
		}
		st.ByType[r.Type][r.Status] += r.N
	}
	if err := s.pool.QueryRow(ctx, binCountSQL).Scan(&st.Bin); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	var err error
	if st.Throughput, err = s.Throughput(ctx); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

const stateQueueCountsSQL = `SELECT status, queue, sum(n)::bigint AS n FROM (` + statsByQueueTypeSQL + `) c GROUP BY status, queue`

// stateQueueCountRow counts the live jobs of one state and queue.
type stateQueueCountRow struct {
	Status string `db:"status"`
	Queue  string `db:"queue"`
	N      int64  `db:"n"`
}

// StateQueueCounts counts live jobs per state and queue (for metrics,
// which cache it).
func (s *Store) StateQueueCounts(ctx context.Context) (map[[2]string]int64, error) {
	var rows []stateQueueCountRow
	if err := s.sqlx.SelectContext(ctx, &rows, stateQueueCountsSQL); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	out := make(map[[2]string]int64, len(rows))
	for _, r := range rows {
		out[[2]string{r.Status, r.Queue}] = r.N
	}
	return out, nil
}

// deadLetterCountSQL counts the dead-letter jobs outside the bin, of queue
// $1 and type $2 when given, from the counts job_counts keeps (exact, and
// no scan of the jobs however many there are).
const deadLetterCountSQL = `
SELECT coalesce(sum(n), 0)::bigint FROM job_counts
WHERE status = 'dead_letter' AND NOT in_bin AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR type = $2)`

// CountDeadLetter counts the dead-letter jobs of queue and type (""
// for any).
func (s *Store) CountDeadLetter(ctx context.Context, queue, typ string) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, deadLetterCountSQL, nullIfEmpty(queue), nullIfEmpty(typ)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count dead-letter jobs: %w", err)
	}
	return n, nil
}

// nullIfEmpty is s as a query parameter, NULL when empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
