package db

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// History shapes what SeedHistory writes.
type History struct {
	Jobs int // finished jobs to write
	Days int // spread over the last Days days; zero means 30
	// Live keeps them in jobs. By default they move to the history as
	// the archiver moves finished jobs, batch by batch.
	Live bool
}

// historyBatch is how many jobs one COPY (and one transaction) writes.
const historyBatch = 50_000

var (
	historyTypes  = []string{"email.send", "report.build", "invoice.render", "image.resize", "webhook.deliver", "search.index", "cache.warm", "export.csv", "sync.crm", "audit.compact"}
	historyQueues = []string{"default", "mail", "reports", "media", "integrations"}
)

var (
	historyJobColumns = []string{"id", "type", "queue", "payload", "priority", "effective_priority", "status", "attempt",
		"max_retries", "executions", "run_at", "last_error", "worker_id", "created_at", "updated_at", "started_at", "finished_at"}
	historyExecColumns = []string{"job_id", "seq", "attempt", "worker_id", "started_at", "finished_at", "outcome", "error", "duration_ms"}
)

// SeedHistory writes h.Jobs finished jobs for measurement — about 90%
// completed, 5% dead-letter, 5% cancelled, each with the one execution
// that finished it — spread evenly at random over the last h.Days days,
// across ten types and five queues, into the tables the engine writes
// (jobs, job_executions), with COPY in batches of 50,000, each then moved
// to the history by the archiver's statement unless h.Live. Ids are UUIDv7
// of each job's creation time, as the engine's are. The jobs are written
// oldest first, as an installation accumulates them: each batch covers
// its slice of the period, so the id- and time-ordered indexes grow at
// their ends. Written in random order, every batch touched pages all over
// every index, and once the indexes outgrew shared_buffers (128 MB) the
// rate fell from 22,000 to 4,000 jobs/s. report, if set, is told how many
// are written after each batch.
func (s *Store) SeedHistory(ctx context.Context, h History, report func(done int)) error {
	if h.Jobs <= 0 {
		return jobs.Invalid("jobs", "must be at least 1")
	}
	// Bulk statements over a whole history (a batch's move, the closing
	// VACUUM ANALYZE) may take longer than a job's statement deadline.
	ctx = WithStatementTimeout(ctx, time.Hour)
	days := h.Days
	if days <= 0 {
		days = 30
	}
	now, err := s.DatabaseNow(ctx)
	if err != nil {
		return fmt.Errorf("seed history: %w", err)
	}
	span := time.Duration(days) * 24 * time.Hour
	r := rand.New(rand.NewPCG(uint64(now.UnixNano()), uint64(h.Jobs)))
	for done := 0; done < h.Jobs; {
		n := min(historyBatch, h.Jobs-done)
		from := now.Add(-span + time.Duration(float64(span)*float64(done)/float64(h.Jobs)))
		slice := time.Duration(float64(span) * float64(n) / float64(h.Jobs))
		jobRows, execRows := historyRows(r, done, n, from, slice)
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"jobs"}, historyJobColumns, pgx.CopyFromRows(jobRows)); err != nil {
				return err
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"job_executions"}, historyExecColumns, pgx.CopyFromRows(execRows))
			return err
		})
		if err != nil {
			return fmt.Errorf("seed history: %w", err)
		}
		for !h.Live {
			moved, err := s.Archive(ctx, 0, historyBatch)
			if err != nil {
				return fmt.Errorf("seed history: %w", err)
			}
			if moved == 0 {
				break
			}
		}
		done += n
		if report != nil {
			report(done)
		}
	}
	if _, err := s.pool.Exec(ctx, analyzeHistorySQL); err != nil {
		return fmt.Errorf("seed history: analyze: %w", err)
	}
	return nil
}

// analyzeHistorySQL leaves a seeded database ready to use: moving the
// seeded jobs to the history left a dead version of every one in jobs,
// which claims would otherwise walk until something vacuums them (on a
// server with autovacuum off, nothing would), and the planner needs the
// new statistics.
const analyzeHistorySQL = `VACUUM (ANALYZE) jobs, job_executions, job_history`

// historyRows builds n jobs (numbered from first) created at random
// within [from, from+slice), in creation order, and their executions.
func historyRows(r *rand.Rand, first, n int, from time.Time, slice time.Duration) (jobRows, execRows [][]any) {
	jobRows, execRows = make([][]any, n), make([][]any, n)
	const worker = "history-seed"
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = r.Int64N(max(int64(slice), 1))
	}
	slices.Sort(offsets)
	for i := range n {
		k := first + i
		created := from.Add(time.Duration(offsets[i])).Truncate(time.Microsecond)
		started := created.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
		took := time.Duration(5+r.IntN(3000)) * time.Millisecond
		finished := started.Add(took)
		prio := 1 + r.IntN(3)
		status, outcome := jobs.StateCompleted, domain.OutcomeSucceeded
		var lastErr *string
		// One job in 20 is dead-lettered and one cancelled, at a place in
		// each block of 20 that moves from block to block, so those land
		// on every type and queue (k % 20 alone put them all on one type).
		switch (k + k/20) % 20 {
		case 0:
			status, outcome = jobs.StateDeadLetter, domain.OutcomeFailed
			e := "seeded: the handler failed for good (permanent error)"
			lastErr = &e
		case 1:
			status, outcome = jobs.StateCancelled, domain.OutcomeCancelled
			e := "seeded: cancelled while running"
			lastErr = &e
		}
		id := uuidV7At(r, created)
		jobRows[i] = []any{[16]byte(id), historyTypes[k%len(historyTypes)], historyQueues[(k/len(historyTypes))%len(historyQueues)],
			fmt.Sprintf(`{"seed": %d}`, k), int16(prio), float64(prio), string(status), int32(1), int32(3), int32(1),
			created, lastErr, worker, created, finished, started, finished}
		execRows[i] = []any{[16]byte(id), int32(1), int32(1), worker, started, finished, string(outcome), lastErr, took.Milliseconds()}
	}
	return jobRows, execRows
}

// uuidV7At is a version 7 UUID whose timestamp is t.
func uuidV7At(r *rand.Rand, t time.Time) uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[8:], r.Uint64())
	binary.BigEndian.PutUint64(id[0:8], uint64(t.UnixMilli())<<16|r.Uint64()&0xffff)
	id[6] = id[6]&0x0f | 0x70 // version 7
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// oldestDaySQL finds the day of the oldest completed job, in the history
// (its oldest day partition holds one) or, for live, in jobs.
const (
	oldestHistoryDaySQL = `SELECT min(day) FROM job_history_counts WHERE status = 'completed' AND n > 0`
	oldestLiveDaySQL    = `SELECT (finished_at AT TIME ZONE 'UTC')::date FROM jobs
WHERE status = 'completed' AND status <> 'running' AND deleted_at IS NULL ORDER BY id LIMIT 1`
	completedOnDaySQL = `SELECT coalesce(sum(n), 0) FROM job_history_counts WHERE status = 'completed' AND day = $1`
)

// RemoveOldestDay removes the oldest day of completed jobs the way
// retention does: from the history by dropping its partition, or, for
// live, from jobs by deleting rows in the pruner's batches of 1,000. It
// returns the day and how many jobs went. It is a measurement: `flint
// bench drop-day`.
func (s *Store) RemoveOldestDay(ctx context.Context, live bool) (time.Time, int64, error) {
	var day *time.Time
	q := oldestHistoryDaySQL
	if live {
		q = oldestLiveDaySQL
	}
	if err := s.pool.QueryRow(ctx, q).Scan(&day); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, 0, fmt.Errorf("find the oldest day: %w", err)
	}
	if day == nil {
		return time.Time{}, 0, jobs.Invalid("jobs", "there are no completed jobs to remove; write some with flint bench history")
	}
	// Completed jobs kept one day, nothing else removed, judged at the
	// moment that makes exactly that day expire.
	st := domain.DefaultSettings()
	st.RetentionCompletedDays, st.RetentionCancelledDays, st.RetentionDeadDays, st.RetentionBinDays = 1, 0, 0, 0
	at := day.AddDate(0, 0, 2)
	if !live {
		var n int64
		if err := s.pool.QueryRow(ctx, completedOnDaySQL, *day).Scan(&n); err != nil {
			return *day, 0, fmt.Errorf("count the oldest day: %w", err)
		}
		if _, err := s.DropExpiredHistory(ctx, st, &at); err != nil {
			return *day, 0, err
		}
		return *day, n, nil
	}
	var total int64
	for {
		n, err := s.Prune(ctx, st, &at, 1000)
		if err != nil {
			return *day, total, err
		}
		if n == 0 {
			return *day, total, nil
		}
		total += int64(n)
	}
}
