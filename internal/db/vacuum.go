package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
)

// tableHealthSQL reads PostgreSQL's statistics of the tables that take
// every job's writes.
const tableHealthSQL = `
SELECT relname, n_live_tup, n_dead_tup, last_vacuum, last_autovacuum, last_analyze, last_autoanalyze,
       vacuum_count, autovacuum_count
FROM pg_stat_user_tables
WHERE schemaname = current_schema() AND relname IN ('jobs', 'job_executions')
ORDER BY relname`

// TableHealth returns PostgreSQL's statistics of the jobs and
// job_executions tables: live and dead row versions, and when they were
// last vacuumed and analyzed.
func (s *Store) TableHealth(ctx context.Context) ([]domain.TableHealth, error) {
	rows, err := s.pool.Query(ctx, tableHealthSQL)
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.TableHealth, error) {
		var h domain.TableHealth
		err := row.Scan(&h.Table, &h.LiveTuples, &h.DeadTuples, &h.LastVacuum, &h.LastAutovacuum,
			&h.LastAnalyze, &h.LastAutoanalyze, &h.Vacuums, &h.Autovacuums)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("read table statistics: %w", err)
	}
	return out, nil
}

// vacuumJobsSQL removes the dead row versions of jobs and refreshes its
// statistics. Lazy VACUUM takes a lock that only DDL and other VACUUMs
// wait for; claims, finishes and enqueues go on meanwhile. It must run
// outside a transaction block (pgx sends a statement without arguments
// with the simple protocol, on its own).
const vacuumJobsSQL = `VACUUM (ANALYZE) jobs`

// VacuumJobs vacuums and analyzes the jobs table.
func (s *Store) VacuumJobs(ctx context.Context) error {
	// Minutes on a large table, not milliseconds: its own deadline
	// (db/netfaults.go).
	if _, err := s.pool.Exec(WithStatementTimeout(ctx, time.Hour), vacuumJobsSQL); err != nil {
		return fmt.Errorf("vacuum jobs: %w", err)
	}
	return nil
}
