package db

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/logs"
)

// The log of every Flint process (process_logs).
//
// Pages are read newest first by (at, id), the primary key, so a page is
// one index range scan whatever the filters add.
//
// The live tail cannot follow at or id: entries are written in batches by
// many processes, and a batch that took its ids first may commit last, so
// "after the newest id I saw" would skip it. Instead each row records the
// transaction that wrote it (xid), and the tail reads in (xid, id) order
// only up to the oldest transaction still open on the server, below which
// every write has committed or never will: a mark in that order misses
// nothing. A transaction left open elsewhere on the server would hold the
// tail back indefinitely, so rows stored longer ago than logTailHold pass
// anyway: a log write runs for at most logWriteTimeout, so any write that
// took its xid before such a row's has ended by then.

const (
	// maxLogMessage caps a stored message, in bytes (lines are capped at
	// logs.MaxLineBytes before this).
	maxLogMessage = 16 << 10
	// logWriteTimeout bounds a log write on the server (statement_timeout).
	logWriteTimeout = 10 * time.Second
	// logTailHold: see above; more than twice logWriteTimeout.
	logTailHold = 30 * time.Second
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

// logMark is a position in the tail's (xid, id) order.
type logMark struct {
	xid uint64
	id  int64
}

func (m logMark) String() string {
	return strconv.FormatUint(m.xid, 10) + "." + strconv.FormatInt(m.id, 10)
}

func parseLogMark(s string) (logMark, error) {
	x, i, ok := strings.Cut(s, ".")
	xid, err1 := strconv.ParseUint(x, 10, 64)
	id, err2 := strconv.ParseInt(i, 10, 64)
	if !ok || err1 != nil || err2 != nil || id < 0 {
		return logMark{}, &logs.QueryError{Field: "after", Message: "must be a mark this server returned (data-mark of the page)"}
	}
	return logMark{xid: xid, id: id}, nil
}

func (m logMark) less(o logMark) bool { return m.xid < o.xid || (m.xid == o.xid && m.id < o.id) }

// logMarkSQL finds the newest entry the tail may show: the newest written
// by a transaction older than every one still open, or, past it, the
// newest stored longer ago than $1 seconds. Two index scans rather than
// one with OR, which PostgreSQL would read by scanning the table.
const logMarkSQL = `
WITH committed AS (
	SELECT xid, id FROM process_logs
	WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
	ORDER BY xid DESC, id DESC
	LIMIT 1
), stale AS (
	SELECT xid, id FROM process_logs
	WHERE xid > coalesce((SELECT xid FROM committed), '0'::xid8) AND stored_at < now() - $1 * interval '1 second'
	ORDER BY xid DESC, id DESC
	LIMIT 1
)
SELECT xid::text, id FROM (SELECT xid, id FROM committed UNION ALL SELECT xid, id FROM stale) m
ORDER BY xid DESC, id DESC
LIMIT 1`

func (s *Store) logMark(ctx context.Context) (logMark, error) {
	var xid string
	var m logMark
	err := s.pool.QueryRow(ctx, logMarkSQL, int(logTailHold/time.Second)).Scan(&xid, &m.id)
	if errors.Is(err, pgx.ErrNoRows) {
		return logMark{}, nil
	}
	if err != nil {
		return logMark{}, fmt.Errorf("read the log's mark: %w", err)
	}
	if m.xid, err = strconv.ParseUint(xid, 10, 64); err != nil {
		return logMark{}, fmt.Errorf("read the log's mark: %w", err)
	}
	return m, nil
}

// LogMark returns the live tail's position now: TailLogs after it returns
// exactly the entries that become readable later. Take it before reading
// the page the tail continues; an entry may then show in both (the page
// drops the second by its id), but none in neither.
func (s *Store) LogMark(ctx context.Context) (string, error) {
	m, err := s.logMark(ctx)
	return m.String(), err
}

// TailLogs returns the entries matching q (its cursor and time filters
// aside) that became readable after mark after, newest first, at most
// limit of the newest of them, with the mark to ask after next. missed
// is true when more matched than limit.
func (s *Store) TailLogs(ctx context.Context, q logs.Query, after string, limit int) ([]logs.Entry, string, bool, error) {
	from, err := parseLogMark(after)
	if err != nil {
		return nil, after, false, err
	}
	if err := q.Validate(); err != nil {
		return nil, after, false, err
	}
	to, err := s.logMark(ctx)
	if err != nil {
		return nil, after, false, err
	}
	if !from.less(to) {
		return nil, after, false, nil
	}
	q.Since, q.Until = time.Time{}, time.Time{}
	f := newLogFilter(q)
	f.add("(xid, id) > (" + f.arg(strconv.FormatUint(from.xid, 10)) + "::xid8, " + f.arg(from.id) + "::bigint)")
	f.add("(xid, id) <= (" + f.arg(strconv.FormatUint(to.xid, 10)) + "::xid8, " + f.arg(to.id) + "::bigint)")
	limit = cmp.Or(limit, logs.DefaultLimit)
	query := `SELECT ` + logColumns + ` FROM process_logs WHERE ` + f.cond() +
		` ORDER BY xid DESC, id DESC LIMIT ` + f.arg(limit+1)
	var rows []logRow
	if err := s.sqlx.SelectContext(ctx, &rows, query, f.args...); err != nil {
		return nil, after, false, fmt.Errorf("tail logs: %w", err)
	}
	missed := len(rows) > limit
	if missed {
		rows = rows[:limit]
	}
	// Shown by time, as pages are; they arrived in write order.
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].At.Equal(rows[j].At) {
			return rows[i].At.After(rows[j].At)
		}
		return rows[i].ID > rows[j].ID
	})
	out := make([]logs.Entry, len(rows))
	for i, r := range rows {
		out[i] = r.entry()
	}
	return out, to.String(), missed, nil
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
