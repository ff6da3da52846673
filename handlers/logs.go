package handlers

import (
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
	// The tail's position is taken before the file is read: an entry
	// written in between may show twice, but none is missed.
	page := views.LogsPage{Level: q.Level, JobID: q.JobID, Q: q.Q, Live: q.Before == "", Seq: s.logs.Tail().Seq()}
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
	return render(c, http.StatusOK, views.LogsPageView(s.chrome(c, "Logs", "logs", true), page))
}

// logsTail handles GET /logs/tail?after=N (with the page's filters): the
// live tail's entries recorded after entry number N that the page shows,
// newest first, as table rows. X-Log-Seq is the number to ask after next.
func (s *server) logsTail(c *fiber.Ctx) error {
	q, err := logQuery(c)
	if err != nil {
		return err
	}
	after, err := strconv.ParseUint(c.Query("after"), 10, 64)
	if err != nil {
		return invalid("after", "must be the number of a log entry (data-seq of the page)")
	}
	entries, seq, missed := s.logs.Tail().Since(after, q.Matcher(), 200)
	c.Set("X-Log-Seq", strconv.FormatUint(seq, 10))
	return render(c, http.StatusOK, views.LogTailRows(entries, missed))
}
