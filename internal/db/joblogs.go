package db

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
)

// maxJobLogMessage caps one stored log message, in bytes.
const maxJobLogMessage = 8 << 10

// insertJobLogsSQL stores a batch of job log lines in the order given (seq
// follows it), up to $7 lines per job in all. Lines of a job that has been
// purged meanwhile are skipped rather than failing the batch. Each job it
// writes for is locked (FOR KEY SHARE, once per job, not per line): a
// delete of the job then either waits and takes the lines with it (the
// jobs_forget_deleted trigger) or has committed, and its lines are
// skipped. job_logs has no foreign key to do that.
//
// The cap is kept where lines are stored, whichever process wrote them
// and however many attempts the job had: each job's stored lines are
// counted (an index range of at most $7 + 1 entries, which the cap itself
// bounds), the lines that fit are inserted, and the first line that does
// not becomes a marker — the job's last line, a warning that counts the
// lines dropped in attrs.dropped, raised by every later batch. Two
// processes writing lines of one job at the same moment (a worker that
// lost its lease still logging) may each see room for their batch; the
// cap then yields by at most a batch.
const insertJobLogsSQL = `
WITH l AS (
	SELECT l.*, row_number() OVER (PARTITION BY l.job_id ORDER BY l.ord) AS n
	FROM unnest($1::uuid[], $2::integer[], $3::timestamptz[], $4::text[], $5::text[], $6::text[])
	     WITH ORDINALITY AS l(job_id, attempt, at, level, message, attrs, ord)
),
stored AS (
	SELECT j.id AS job_id, (SELECT count(*) FROM (SELECT 1 FROM job_logs g WHERE g.job_id = j.id LIMIT $7::bigint + 1) c) AS n
	FROM jobs j WHERE j.id IN (SELECT job_id FROM l)
	FOR KEY SHARE OF j
),
over AS (
	SELECT l.job_id, s.n AS stored, count(*) AS dropped, min(l.ord) AS ord
	FROM l JOIN stored s USING (job_id)
	WHERE s.n + l.n > $7::bigint
	GROUP BY l.job_id, s.n
),
bumped AS (
	UPDATE job_logs g SET
		attrs = jsonb_build_object('dropped', coalesce((g.attrs->>'dropped')::bigint, 0) + o.dropped),
		message = format('` + jobLogCapMessage + `', $7::bigint, coalesce((g.attrs->>'dropped')::bigint, 0) + o.dropped)
	FROM over o
	WHERE o.stored > $7::bigint AND g.job_id = o.job_id
	  AND g.seq = (SELECT max(m.seq) FROM job_logs m WHERE m.job_id = o.job_id)
)
INSERT INTO job_logs (job_id, attempt, at, level, message, attrs)
SELECT x.job_id, x.attempt, x.at, x.level, x.message, x.attrs
FROM (
	SELECT l.job_id, l.attempt, l.at, l.level, l.message, l.attrs::jsonb AS attrs, l.ord, 0 AS marker
	FROM l JOIN stored s USING (job_id)
	WHERE s.n + l.n <= $7::bigint
	UNION ALL
	SELECT o.job_id, l.attempt, l.at, 'warn', format('` + jobLogCapMessage + `', $7::bigint, o.dropped),
	       jsonb_build_object('dropped', o.dropped), o.ord, 1
	FROM over o JOIN l ON l.job_id = o.job_id AND l.ord = o.ord
	WHERE o.stored <= $7::bigint
) x
ORDER BY x.marker, x.ord`

// jobLogCapMessage is the marker line of a job past its cap (a format
// for the cap and the number of lines dropped).
const jobLogCapMessage = `this job logged more than %s lines in all; %s later lines were not kept`

// InsertJobLogs stores job log lines in one statement.
func (s *Store) InsertJobLogs(ctx context.Context, lines []domain.LogEntry) error {
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
		msgs[i], attrs[i] = storedLogLine(l)
	}
	if _, err := s.pool.Exec(ctx, insertJobLogsSQL, ids, attempts, ats, levels, msgs, attrs, domain.MaxJobLogTotal); err != nil {
		return fmt.Errorf("store job log lines: %w", err)
	}
	return nil
}

// storedLogLine is a log line's message and attributes as job_logs keeps
// them: scrubbed like the process log, cut to maxJobLogMessage, without
// NUL bytes (which PostgreSQL's text refuses), the attributes as a JSON
// object.
func storedLogLine(l domain.LogEntry) (message, attrs string) {
	message = truncate(logs.Scrub(strings.ReplaceAll(l.Message, "\x00", "")), maxJobLogMessage)
	attrs = "{}"
	if len(l.Attrs) > 0 {
		b, err := json.Marshal(l.Attrs)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"attrs": fmt.Sprint(l.Attrs)})
		}
		attrs = truncate(logs.Scrub(strings.ReplaceAll(string(b), `\u0000`, "")), maxJobLogMessage)
		if !json.Valid([]byte(attrs)) {
			attrs = "{}"
		}
	}
	return message, attrs
}

// finishLines are the log lines that ride with a batch of outcomes (see
// domain.Finish.Log), laid out as finishSQL's parallel arrays: each line
// names its job and the lease it was written under, and is stored only
// if that outcome is.
type finishLines struct {
	jobs, tokens            []uuid.UUID
	attempts                []int32
	ats                     []time.Time
	levels, messages, attrs []string
}

// add appends the lines of one outcome, scrubbed and cut as job_logs
// keeps them.
func (l *finishLines) add(f domain.Finish) {
	for _, line := range f.Log {
		msg, attrs := storedLogLine(line)
		l.jobs, l.tokens = append(l.jobs, f.JobID), append(l.tokens, f.Token)
		l.attempts, l.ats = append(l.attempts, int32(line.Attempt)), append(l.ats, line.At)
		l.levels, l.messages, l.attrs = append(l.levels, line.Level), append(l.messages, msg), append(l.attrs, attrs)
	}
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
func (s *Store) JobLogs(ctx context.Context, id uuid.UUID, after int64, limit int) ([]domain.LogEntry, error) {
	var rows []jobLogRow
	if err := s.sqlx.SelectContext(ctx, &rows, jobLogsSQL, id, after, limit, historyFloor(id)); err != nil {
		return nil, fmt.Errorf("read job log: %w", err)
	}
	out := make([]domain.LogEntry, len(rows))
	for i, r := range rows {
		out[i] = domain.LogEntry{JobID: r.JobID, Seq: r.Seq, Attempt: r.Attempt, At: r.At, Level: r.Level, Message: logs.Scrub(r.Message)}
		if len(r.Attrs) > 2 {
			_ = json.Unmarshal([]byte(logs.Scrub(string(r.Attrs))), &out[i].Attrs) // stored as valid JSON; scrubbing keeps it so
		}
	}
	return out, nil
}
