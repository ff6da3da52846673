package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
)

// maxJobLogMessage caps one stored log message, in bytes.
const maxJobLogMessage = 8 << 10

// insertJobLogsSQL stores a batch of job log lines in the order given (seq
// follows it). Lines of a job that has been purged meanwhile are skipped
// rather than failing the batch.
const insertJobLogsSQL = `
INSERT INTO job_logs (job_id, attempt, at, level, message, attrs)
SELECT l.job_id, l.attempt, l.at, l.level, l.message, l.attrs::jsonb
FROM unnest($1::uuid[], $2::integer[], $3::timestamptz[], $4::text[], $5::text[], $6::text[])
     WITH ORDINALITY AS l(job_id, attempt, at, level, message, attrs, ord)
WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.id = l.job_id)
ORDER BY l.ord`

// InsertJobLogs stores job log lines in one statement.
func (s *Store) InsertJobLogs(ctx context.Context, lines []jobs.LogEntry) error {
	if len(lines) == 0 {
		return nil
	}
	n := len(lines)
	ids := make([]uuid.UUID, n)
	attempts := make([]int32, n)
	ats := make([]time.Time, n)
	levels, msgs, attrs := make([]string, n), make([]string, n), make([]string, n)
	for i, l := range lines {
		ids[i], attempts[i], ats[i], levels[i] = l.JobID, int32(l.Attempt), l.At, l.Level
		msgs[i] = truncate(l.Message, maxJobLogMessage)
		attrs[i] = "{}"
		if len(l.Attrs) > 0 {
			b, err := json.Marshal(l.Attrs)
			if err != nil {
				b, _ = json.Marshal(map[string]string{"attrs": fmt.Sprint(l.Attrs)})
			}
			attrs[i] = truncate(string(b), maxJobLogMessage)
			if !json.Valid([]byte(attrs[i])) {
				attrs[i] = "{}"
			}
		}
	}
	if _, err := s.pool.Exec(ctx, insertJobLogsSQL, uuidArray(ids), attempts, ats, levels, msgs, attrs); err != nil {
		return fmt.Errorf("store job log lines: %w", err)
	}
	return nil
}

// jobLogRow is a job_logs row.
type jobLogRow struct {
	JobID   uuid.UUID `db:"job_id"`
	Seq     int64     `db:"seq"`
	Attempt int       `db:"attempt"`
	At      time.Time `db:"at"`
	Level   string    `db:"level"`
	Message string    `db:"message"`
	Attrs   []byte    `db:"attrs"`
}

const jobLogsSQL = `
SELECT job_id, seq, attempt, at, level, message, attrs FROM job_logs
WHERE job_id = $1 AND seq > $2
UNION ALL
SELECT h.id, x.seq, x.attempt, x.at, x.level, x.message, x.attrs
FROM job_history h, jsonb_to_recordset(h.log_rows) AS ` + logRecord + `
WHERE h.id = $1 AND h.finished_at >= $4 AND x.seq > $2
ORDER BY seq LIMIT $3`

// JobLogs returns a job's stored log lines after seq after, oldest first.
func (s *Store) JobLogs(ctx context.Context, id uuid.UUID, after int64, limit int) ([]jobs.LogEntry, error) {
	var rows []jobLogRow
	if err := s.sqlx.SelectContext(ctx, &rows, jobLogsSQL, id, after, limit, historyFloor(id)); err != nil {
		return nil, fmt.Errorf("read job log: %w", err)
	}
	out := make([]jobs.LogEntry, len(rows))
	for i, r := range rows {
		out[i] = jobs.LogEntry{JobID: r.JobID, Seq: r.Seq, Attempt: r.Attempt, At: r.At, Level: r.Level, Message: r.Message}
		if len(r.Attrs) > 2 {
			_ = json.Unmarshal(r.Attrs, &out[i].Attrs) // stored as valid JSON
		}
	}
	return out, nil
}
