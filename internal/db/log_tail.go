package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/logs"
)

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

// logTailHold is how long ago a row must have been stored to pass the
// tail's mark whatever transactions are open: more than twice
// logWriteTimeout.
const logTailHold = 30 * time.Second

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
