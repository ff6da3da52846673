package db

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// historyDDLLock is the advisory lock that makes one process at a time
// create or drop history partitions.
const historyDDLLock = `SELECT pg_advisory_xact_lock(7146522309)`

// historyLockTimeout bounds how long partition DDL waits for the lock on
// its parent: a long transaction that read the history must not stall the
// readers queued behind the DDL. It tries again on its next turn.
const historyLockTimeout = `SET LOCAL lock_timeout = '2s'`

// ensureHistoryPartitions creates the day partitions of state for days
// that do not exist yet.
func (s *Store) ensureHistoryPartitions(ctx context.Context, state jobs.State, days []time.Time) error {
	var missing []time.Time
	for _, d := range days {
		if _, ok := s.historyParts.Load(historyPartition(state, d)); !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, historyDDLLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, historyLockTimeout); err != nil {
			return err
		}
		for _, d := range missing {
			from := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
			ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
				pgx.Identifier{historyPartition(state, from)}.Sanitize(),
				pgx.Identifier{"job_history_" + string(state)}.Sanitize(),
				from.Format(time.RFC3339), from.AddDate(0, 0, 1).Format(time.RFC3339))
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create history partitions of %s jobs: %w", state, err)
	}
	for _, d := range missing {
		s.historyParts.Store(historyPartition(state, d), struct{}{})
	}
	return nil
}

// historyPartitionsSQL lists the day partitions of the history.
const historyPartitionsSQL = `
SELECT c.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
JOIN pg_class p ON p.oid = i.inhparent
WHERE p.relname IN ('job_history_completed', 'job_history_cancelled', 'job_history_dead_letter')
ORDER BY c.relname`

// HistoryPartition is one day of one final state in the history.
type HistoryPartition struct {
	// Name is the partition's table, job_history_<state>_<yyyymmdd>.
	Name string
	// State is the final state of every job in the partition.
	State jobs.State
	// Day is the UTC day its jobs finished on, at midnight UTC.
	Day time.Time
}

// HistoryPartitions lists the day partitions of the history, oldest first
// within each state.
func (s *Store) HistoryPartitions(ctx context.Context) ([]HistoryPartition, error) {
	rows, err := s.pool.Query(ctx, historyPartitionsSQL)
	if err != nil {
		return nil, fmt.Errorf("list history partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list history partitions: %w", err)
	}
	out := make([]HistoryPartition, 0, len(names))
	for _, name := range names {
		for _, st := range historyStates {
			rest, ok := strings.CutPrefix(name, "job_history_"+string(st)+"_")
			if !ok {
				continue
			}
			if day, err := time.Parse("20060102", rest); err == nil {
				out = append(out, HistoryPartition{Name: name, State: st, Day: day})
			}
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].State != out[k].State {
			return out[i].State < out[k].State
		}
		return out[i].Day.Before(out[k].Day)
	})
	return out, nil
}

// dropHistoryKeysSQL frees the idempotency keys of a day partition's jobs
// as it goes.
const dropHistoryKeysSQL = `DELETE FROM job_history_keys WHERE status = $1 AND day = $2`

// dropHistoryCountsSQL takes a day partition's jobs out of job_counts as
// it goes.
const dropHistoryCountsSQL = `
WITH gone AS (
	DELETE FROM job_history_counts WHERE status = $1 AND day = $2
	RETURNING status, queue, type, n
)
INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
SELECT queue, type, status, false, 0, -sum(n) FROM gone
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n`

// errDroppedAlready: another process dropped the partition first.
var errDroppedAlready = errors.New("history partition dropped already")

// DropExpiredHistory drops the day partitions whose every job is past its
// state's retention at now (nil: the database clock): a day goes once its
// end is older than the retention. It returns the partitions dropped. A
// partition whose lock is not granted within two seconds (a long
// transaction read it) is left for the next turn.
func (s *Store) DropExpiredHistory(ctx context.Context, st domain.Settings, now *time.Time) ([]string, error) {
	var at time.Time
	var err error
	if now != nil {
		at = *now
	} else if at, err = s.DatabaseNow(ctx); err != nil {
		return nil, fmt.Errorf("drop history: %w", err)
	}
	keep := map[jobs.State]int{
		jobs.StateCompleted:  st.RetentionCompletedDays,
		jobs.StateCancelled:  st.RetentionCancelledDays,
		jobs.StateDeadLetter: st.RetentionDeadDays,
	}
	parts, err := s.HistoryPartitions(ctx)
	if err != nil {
		return nil, err
	}
	var dropped []string
	var errs []error
	for _, p := range parts {
		days := keep[p.State]
		if days <= 0 || p.Day.AddDate(0, 0, 1).After(at.Add(-time.Duration(days)*24*time.Hour)) {
			continue
		}
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, historyDDLLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, historyLockTimeout); err != nil {
				return err
			}
			// The partition's lock first: a move into this day that
			// committed after the counts and keys below were read would
			// otherwise leave them counting rows the drop removes.
			if _, err := tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{p.Name}.Sanitize()+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
					return errDroppedAlready
				}
				return err
			}
			if _, err := tx.Exec(ctx, dropHistoryCountsSQL, string(p.State), p.Day); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, dropHistoryKeysSQL, string(p.State), p.Day); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{p.Name}.Sanitize())
			return err
		})
		if errors.Is(err, errDroppedAlready) {
			s.historyParts.Delete(p.Name)
			continue // another process dropped it first
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("drop history partition %s: %w", p.Name, err))
			continue
		}
		s.historyParts.Delete(p.Name)
		dropped = append(dropped, p.Name)
	}
	return dropped, errors.Join(errs...)
}
