package db

import (
	"context"
	"flint/jobs"
	"fmt"
)

const statsByQueueTypeSQL = `
SELECT queue, type, status, count(*) FROM jobs WHERE deleted_at IS NULL GROUP BY queue, type, status`

const binCountSQL = `SELECT count(*) FROM jobs WHERE deleted_at IS NOT NULL`

// Stats counts jobs per state, queue and type, and reads the last hour of
// throughput. The counts scan the live rows once; callers that poll it should
// cache the result for a second or two.
func (s *Store) Stats(ctx context.Context) (*jobs.Stats, error) {
	st := &jobs.Stats{
		ByStatus: map[string]int64{},
		ByQueue:  map[string]map[string]int64{},
		ByType:   map[string]map[string]int64{},
	}
	rows, err := s.pool.Query(ctx, statsByQueueTypeSQL)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	for rows.Next() {
		var queue, typ, status string
		var n int64
		if err := rows.Scan(&queue, &typ, &status, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("stats: %w", err)
		}
		st.ByStatus[status] += n
		if st.ByQueue[queue] == nil {
			st.ByQueue[queue] = map[string]int64{}
		}
		st.ByQueue[queue][status] += n
		if st.ByType[typ] == nil {
			st.ByType[typ] = map[string]int64{}
		}
		st.ByType[typ][status] += n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if err := s.pool.QueryRow(ctx, binCountSQL).Scan(&st.Bin); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	if st.Throughput, err = s.Throughput(ctx); err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

const stateQueueCountsSQL = `SELECT status, queue, count(*) FROM jobs WHERE deleted_at IS NULL GROUP BY status, queue`

// StateQueueCounts counts live jobs per state and queue (for metrics,
// which cache it).
func (s *Store) StateQueueCounts(ctx context.Context) (map[[2]string]int64, error) {
	rows, err := s.pool.Query(ctx, stateQueueCountsSQL)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[[2]string]int64{}
	for rows.Next() {
		var st, q string
		var n int64
		if err := rows.Scan(&st, &q, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[[2]string{st, q}] = n
	}
	return out, rows.Err()
}
