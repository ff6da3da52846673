package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/views"
)

// LogSource is what the log API and page read: the entries every Flint
// process stored; *db.Store implements it.
type LogSource interface {
	// ReadLogs returns one page of the entries matching q, newest first,
	// and the cursor of the next (older) page, "" at the end. An invalid
	// query is a *logs.QueryError.
	ReadLogs(ctx context.Context, q logs.Query) ([]logs.Entry, string, error)
	// TailLogs returns up to limit of the newest entries matching q that
	// became readable after the mark after, newest first, the mark to ask
	// after next, and whether more matched than limit.
	TailLogs(ctx context.Context, q logs.Query, after string, limit int) ([]logs.Entry, string, bool, error)
	// LogMark returns the live tail's position now, to take before
	// reading the page the tail continues.
	LogMark(ctx context.Context) (string, error)
	// LogProcesses returns up to limit processes that have entries in the
	// log, the most recently heard from first.
	LogProcesses(ctx context.Context, limit int) ([]logs.SeenProcess, error)
}

const (
	// logTailRows is the most rows one fetch of the live tail adds.
	logTailRows = 200
	// logProcessChoices is the most processes the page's filter offers.
	logProcessChoices = 200
)

// logWindows are the page's "last …" choices.
var logWindows = map[string]time.Duration{
	"15m": 15 * time.Minute, "1h": time.Hour, "6h": 6 * time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour,
}

// logTime parses a since or until value: RFC 3339, or a date and time
// without a zone (a datetime-local field), read as UTC.
func logTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, invalid(name, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z (without a zone: UTC)")
}

// logQuery reads the log filters from the query string.
func (s *server) logQuery(c *fiber.Ctx) (logs.Query, error) {
	q := logs.Query{Level: c.Query("level"), Process: c.Query("process"), Component: c.Query("component"),
		JobID: c.Query("job_id"), Q: c.Query("q"), Before: c.Query("before")}
	var err error
	if q.Since, err = logTime("since", c.Query("since")); err != nil {
		return q, err
	}
	if q.Until, err = logTime("until", c.Query("until")); err != nil {
		return q, err
	}
	if v := c.Query("last"); v != "" {
		d, ok := logWindows[v]
		if !ok {
			return q, invalid("last", "must be one of 15m, 1h, 6h, 24h, 7d")
		}
		if since := s.clock.Now().Add(-d); since.After(q.Since) {
			q.Since = since
		}
	}
	if v := c.Query("limit"); v != "" {
		// Checked here: to logs.Query, a limit of 0 means the default.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > logs.MaxLimit {
			return q, invalid("limit", fmt.Sprintf("must be a whole number between 1 and %d", logs.MaxLimit))
		}
		q.Limit = n
	}
	if err := q.Validate(); err != nil {
		return q, logError(err)
	}
	return q, nil
}

func logError(err error) error {
	var qe *logs.QueryError
	if errors.As(err, &qe) {
		return invalid(qe.Field, qe.Message)
	}
	return err
}

// listLogs handles GET /api/v1/logs: the structured log entries of every
// Flint process, newest first, filtered by level (minimum), process,
// component, job_id, q (text) and time (since, until or last), paged with
// before=<next_before>.
func (s *server) listLogs(c *fiber.Ctx) error {
	q, err := s.logQuery(c)
	if err != nil {
		return err
	}
	entries, next, err := s.logs.ReadLogs(c.UserContext(), q)
	if err != nil {
		return logError(err)
	}
	if entries == nil {
		entries = []logs.Entry{}
	}
	var nb *string
	if next != "" {
		nb = &next
	}
	return c.JSON(fiber.Map{"entries": entries, "next_before": nb})
}

// logsPage handles GET /logs.
func (s *server) logsPage(c *fiber.Ctx) error {
	ctx := c.UserContext()
	q, qerr := s.logQuery(c)
	page := views.LogsPage{
		Filter: views.LogFilter{Level: q.Level, Process: q.Process, Component: q.Component, JobID: q.JobID, Q: q.Q,
			Last: c.Query("last"), Until: c.Query("until")},
		Live: q.Before == "" && q.Until.IsZero(),
		Now:  s.clock.Now(),
	}
	// The tail's mark is taken before the page is read: an entry stored in
	// between may come twice (the page keeps one), but none is missed.
	mark, err := s.logs.LogMark(ctx)
	if err != nil {
		return err
	}
	page.Mark = mark
	if err := s.readLogPage(ctx, q, qerr, &page); err != nil {
		return err
	}
	// Filters that do not make sense get the page with the message, as a
	// 422 like the API's (htmx swaps a 422 in).
	status := http.StatusOK
	if page.Error != "" {
		status = http.StatusUnprocessableEntity
	}
	if isHX(c) && c.Get("HX-Target") == "log-table" {
		return render(c, status, views.LogTable(page))
	}
	if page.Processes, err = s.logs.LogProcesses(ctx, logProcessChoices); err != nil {
		return err
	}
	return render(c, status, views.LogsPageView(s.chrome(c, "Logs", "logs", true), page))
}

// readLogPage fills the page's entries, or its message for filters that
// do not make sense.
func (s *server) readLogPage(ctx context.Context, q logs.Query, qerr error, page *views.LogsPage) error {
	var ae *apiError
	if errors.As(qerr, &ae) {
		page.Error = ae.Field + " " + ae.Message
		page.Live = false
		return nil
	}
	entries, next, err := s.logs.ReadLogs(ctx, q)
	if err != nil {
		return logError(err)
	}
	page.Entries, page.Next = entries, next
	return nil
}

// logsTail handles GET /logs/tail?after=MARK (with the page's filters): the
// entries stored after the mark that the page shows, newest first, as
// table rows. X-Log-Mark is the mark to ask after next.
func (s *server) logsTail(c *fiber.Ctx) error {
	q, err := s.logQuery(c)
	if err != nil {
		return err
	}
	entries, mark, missed, err := s.logs.TailLogs(c.UserContext(), q, c.Query("after"), logTailRows)
	if err != nil {
		return logError(err)
	}
	c.Set("X-Log-Mark", mark)
	return render(c, http.StatusOK, views.LogTailRows(entries, missed, s.clock.Now()))
}
