package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"flint/logs"
	"flint/views"
)

// LogSource is what the log API and page read; *logs.Logger implements it.
type LogSource interface {
	Read(q logs.Query) ([]logs.Entry, string, error)
	Tail() *logs.Tail
}

// logQuery reads the log filters from the query string.
func logQuery(c *fiber.Ctx) (logs.Query, error) {
	q := logs.Query{Level: c.Query("level"), JobID: c.Query("job_id"), Q: c.Query("q"), Before: c.Query("before")}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return q, invalid("since", "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		q.Since = t
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
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

// listLogs handles GET /api/v1/logs: structured log entries of this
// process, newest first, filtered by level (minimum), job_id, q (text) and
// since, paged with before=<next_before>.
func (s *server) listLogs(c *fiber.Ctx) error {
	q, err := logQuery(c)
	if err != nil {
		return err
	}
	entries, next, err := s.logs.Read(q)
	if errors.Is(err, logs.ErrNoFile) {
		return c.JSON(fiber.Map{"entries": []logs.Entry{}, "next_before": nil, "note": "this process logs to stdout only (FLINT_LOG_FILE=-)"})
	}
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
	q, err := logQuery(c)
	page := views.LogsPage{Level: q.Level, JobID: q.JobID, Q: q.Q}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			page.Error = ae.Message
		}
		q = logs.Query{}
	} else {
		entries, next, err := s.logs.Read(q)
		switch {
		case errors.Is(err, logs.ErrNoFile):
			page.Error = "This process logs to standard output only (FLINT_LOG_FILE=-), so there is no log file to show. The live tail below still works."
		case err != nil:
			page.Error = "Cannot read logs: " + logError(err).Error()
		}
		page.Entries, page.Next = entries, next
	}
	if isHX(c) && c.Get("HX-Target") == "log-table" {
		return render(c, http.StatusOK, views.LogTable(page))
	}
	return render(c, http.StatusOK, views.LogsPageView(s.chrome(c, "Logs", "logs", "/logs/stream"), page))
}

// logsStream handles GET /logs/stream: the live tail as SSE, each new
// entry (matching the page's filters) rendered as a table row.
func (s *server) logsStream(c *fiber.Ctx) error {
	q, err := logQuery(c)
	if err != nil {
		return err
	}
	ch, cancel := s.logs.Tail().Subscribe(q.Matcher(), 256)
	return s.openEventStream(c, func(ctx context.Context, w *bufio.Writer) {
		defer cancel()
		if w.Flush() != nil {
			return
		}
		beat := time.NewTicker(sseHeartbeat)
		defer beat.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-ch:
				if !ok {
					return // too slow or shutting down: the client reconnects
				}
				if writeHTMLEvent(ctx, w, "log", views.LogRow(e)) != nil {
					return
				}
			case <-beat.C:
				fmt.Fprint(w, ": keep-alive\n\n")
			}
			if w.Flush() != nil {
				return
			}
		}
	})
}
