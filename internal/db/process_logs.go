package db

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/logs"
)

// The log of every Flint process (process_logs).
//
// Pages are read newest first by (at, id), the primary key, so a page is
// one index range scan whatever the filters add.

const (
	// maxLogMessage caps a stored message, in bytes (lines are capped at
	// logs.MaxLineBytes before this).
	maxLogMessage = 16 << 10
	// logWriteTimeout bounds a log write on the server (statement_timeout).
	logWriteTimeout = 10 * time.Second
)

// logWriteTimeoutSQL sets statement_timeout (in ms) for the rest of the
// batch's implicit transaction, which ends with the insert.
const logWriteTimeoutSQL = `SELECT set_config('statement_timeout', $1, true)`

// insertLogsSQL stores a batch of one process's entries.
const insertLogsSQL = `
INSERT INTO process_logs (at, level, process_id, host, role, component, message, job_id, attrs)
SELECT l.at, l.level, $1, $2, $3, l.component, l.message, nullif(l.job_id, '')::uuid, l.attrs::jsonb
FROM unnest($4::timestamptz[], $5::smallint[], $6::text[], $7::text[], $8::text[], $9::text[])
     AS l(at, level, component, message, job_id, attrs)`

// InsertLogs stores entries logged by process p in one statement, under a
// server-side time limit (see above). It implements logs.Sink.
func (s *Store) InsertLogs(ctx context.Context, p logs.Process, entries []logs.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	ats := make([]time.Time, n)
	levels := make([]int16, n)
	components, msgs, jobIDs, attrs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, e := range entries {
		ats[i] = e.Time
		lv, err := logs.ParseLevel(e.Level)
		if err != nil {
			lv = slog.LevelInfo
		}
		levels[i] = int16(max(min(lv, 32000), -32000))
		components[i] = truncate(e.Component, 200)
		msgs[i] = truncate(e.Msg, maxLogMessage)
		a := e.StoredAttrs()
		if e.JobID != "" {
			if id, err := uuid.Parse(e.JobID); err == nil {
				jobIDs[i] = id.String()
			} else {
				a["job_id"] = e.JobID
			}
		}
		if p.Role != "" && a["role"] == p.Role {
			delete(a, "role") // the process's identity is stored once, in columns
		}
		attrs[i] = logAttrsJSON(a)
	}
	b := &pgx.Batch{}
	b.Queue(logWriteTimeoutSQL, strconv.FormatInt(logWriteTimeout.Milliseconds(), 10))
	b.Queue(insertLogsSQL, truncate(p.ID, 200), truncate(p.Host, 200), truncate(p.Role, 50),
		ats, levels, components, msgs, jobIDs, attrs)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store log entries: %w", err)
	}
	return nil
}

// logAttrsJSON encodes attributes for the jsonb column, which refuses NUL
// characters in keys and strings: they are dropped, as from text columns.
func logAttrsJSON(a map[string]any) string {
	if len(a) == 0 {
		return "{}"
	}
	b, err := json.Marshal(withoutNUL(a))
	if err != nil {
		b, _ = json.Marshal(map[string]string{"attrs": truncate(fmt.Sprint(a), maxLogMessage)})
	}
	return string(b)
}

func withoutNUL(v any) any {
	switch t := v.(type) {
	case string:
		return strings.ReplaceAll(t, "\x00", "")
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, fv := range t {
			out[strings.ReplaceAll(k, "\x00", "")] = withoutNUL(fv)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, ev := range t {
			out[i] = withoutNUL(ev)
		}
		return out
	}
	return v
}

// logRow is a process_logs row as read.
type logRow struct {
	ID        int64      `db:"id"`
	At        time.Time  `db:"at"`
	Level     int16      `db:"level"`
	ProcessID string     `db:"process_id"`
	Host      string     `db:"host"`
	Role      string     `db:"role"`
	Component string     `db:"component"`
	Message   string     `db:"message"`
	JobID     *uuid.UUID `db:"job_id"`
	Attrs     []byte     `db:"attrs"`
}

const logColumns = `id, at, level, process_id, host, role, component, message, job_id, attrs`

func (r logRow) entry() logs.Entry {
	e := logs.Entry{ID: r.ID, Time: r.At, Level: slog.Level(r.Level).String(), Msg: r.Message,
		ProcessID: r.ProcessID, Host: r.Host, Role: r.Role, Component: r.Component}
	if r.JobID != nil {
		e.JobID = r.JobID.String()
	}
	if len(r.Attrs) > 2 {
		_ = json.Unmarshal(r.Attrs, &e.Attrs) // stored as valid JSON
		e.LiftAttrs()
	}
	return e
}

// logFilter turns q's filters (not its cursor) into conditions.
type logFilter struct {
	where []string
	args  []any
}

func (f *logFilter) arg(v any) string {
	f.args = append(f.args, v)
	return "$" + strconv.Itoa(len(f.args))
}

func (f *logFilter) add(cond string) { f.where = append(f.where, cond) }

func (f *logFilter) cond() string {
	if len(f.where) == 0 {
		return "TRUE"
	}
	return strings.Join(f.where, " AND ")
}

func newLogFilter(q logs.Query) *logFilter {
	f := &logFilter{}
	if q.Level != "" {
		// A number of the code's, written out so that the planner sees
		// that process_logs_warn_idx covers it.
		f.add("level >= " + strconv.Itoa(int(q.MinLevel())))
	}
	if q.Process != "" {
		f.add("process_id = " + f.arg(q.Process))
	}
	if q.Component != "" {
		f.add("component = " + f.arg(q.Component))
	}
	if q.JobID != "" {
		f.add("job_id = " + f.arg(q.JobID) + "::uuid")
	}
	if q.Q != "" {
		p := f.arg("%" + escapeLike(q.Q) + "%")
		f.add("(message ILIKE " + p + " OR component ILIKE " + p + " OR attrs::text ILIKE " + p +
			" OR job_id::text ILIKE " + p + ")")
	}
	if !q.Since.IsZero() {
		f.add("at >= " + f.arg(q.Since))
	}
	if !q.Until.IsZero() {
		f.add("at < " + f.arg(q.Until))
	}
	return f
}

// ReadLogs returns one page of the entries matching q, newest first, and
// the cursor of the next (older) page, "" at the end. Invalid queries
// yield *logs.QueryError.
func (s *Store) ReadLogs(ctx context.Context, q logs.Query) ([]logs.Entry, string, error) {
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	f := newLogFilter(q)
	if c, ok := q.BeforeCursor(); ok {
		f.add("(at, id) < (" + f.arg(c.Time) + ", " + f.arg(c.ID) + ")")
	}
	query := `SELECT ` + logColumns + ` FROM process_logs WHERE ` + f.cond() +
		` ORDER BY at DESC, id DESC LIMIT ` + f.arg(q.Limit+1)
	var rows []logRow
	if err := s.sqlx.SelectContext(ctx, &rows, query, f.args...); err != nil {
		return nil, "", fmt.Errorf("read logs: %w", err)
	}
	next := ""
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		last := rows[len(rows)-1]
		next = logs.Cursor{Time: last.At, ID: last.ID}.String()
	}
	out := make([]logs.Entry, len(rows))
	for i, r := range rows {
		out[i] = r.entry()
	}
	return out, next, nil
}

// logProcessesSQL lists the processes with entries, newest first: a skip
// scan over process_logs_process_idx (one probe per process, never a pass
// over the table), then each one's newest entry.
const logProcessesSQL = `
WITH RECURSIVE ids AS (
	(SELECT process_id FROM process_logs ORDER BY process_id LIMIT 1)
	UNION ALL
	SELECT (SELECT p.process_id FROM process_logs p WHERE p.process_id > ids.process_id ORDER BY p.process_id LIMIT 1)
	FROM ids WHERE ids.process_id IS NOT NULL
)
SELECT l.process_id, l.host, l.role, l.at
FROM ids CROSS JOIN LATERAL (
	SELECT p.process_id, p.host, p.role, p.at FROM process_logs p
	WHERE p.process_id = ids.process_id ORDER BY p.at DESC, p.id DESC LIMIT 1
) l
ORDER BY l.at DESC
LIMIT $1`

// LogProcesses returns up to limit processes that have entries in the log,
// the most recently heard from first.
func (s *Store) LogProcesses(ctx context.Context, limit int) ([]logs.SeenProcess, error) {
	var rows []struct {
		ID   string    `db:"process_id"`
		Host string    `db:"host"`
		Role string    `db:"role"`
		At   time.Time `db:"at"`
	}
	if err := s.sqlx.SelectContext(ctx, &rows, logProcessesSQL, limit); err != nil {
		return nil, fmt.Errorf("list logging processes: %w", err)
	}
	out := make([]logs.SeenProcess, len(rows))
	for i, r := range rows {
		out[i] = logs.SeenProcess{Process: logs.Process{ID: r.ID, Host: r.Host, Role: r.Role}, Last: r.At}
	}
	return out, nil
}

// pruneLogsSQL deletes the oldest entries logged before the cutoff, from
// the start of the primary key.
const pruneLogsSQL = `
DELETE FROM process_logs WHERE (at, id) IN (
	SELECT at, id FROM process_logs
	WHERE at < coalesce($1::timestamptz, now()) - $2 * interval '1 day'
	ORDER BY at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED)`

// PruneLogs deletes up to limit log entries older than days days before
// now (nil: the database clock); days ≤ 0 keeps them for ever.
func (s *Store) PruneLogs(ctx context.Context, days int, now *time.Time, limit int) (int, error) {
	if days <= 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, pruneLogsSQL, now, days, limit)
	if err != nil {
		return 0, fmt.Errorf("prune log entries: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
