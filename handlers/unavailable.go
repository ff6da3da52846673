package handlers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/views"
)

// While the database cannot be reached or cannot take writes (it is down,
// failing over to a standby, or the connection landed on a read-only
// server), requests that need it are answered 503 with Retry-After rather
// than 500: the API with the code database_unavailable, dashboard pages
// with a page that says so and reloads itself, HTMX requests with an empty
// 503 whose X-Flint-Database header makes the page show a banner.

// retryAfterSeconds is the Retry-After of those answers: a failover
// usually completes within a few seconds.
const retryAfterSeconds = 5

// errDatabaseUnavailable is the API's answer while the database is away.
var errDatabaseUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "database_unavailable",
	Message: "the database is unreachable or read-only (a failover may be under way); retry after a few seconds"}

// sqlStater is what PostgreSQL errors carry: their SQLSTATE.
type sqlStater interface{ SQLState() string }

// databaseUnavailable reports whether err means the database is away, as
// opposed to a statement that failed on a working database: SQLSTATE 25006
// (read-only transaction), 57P01-57P03 (shutting down, crashed, starting)
// and class 08 (connection exceptions), network errors, timeouts and
// closed connections.
func databaseUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var st sqlStater
	if errors.As(err, &st) {
		switch code := st.SQLState(); code {
		case "25006", "57P01", "57P02", "57P03":
			return true
		default:
			return strings.HasPrefix(code, "08")
		}
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "failed to connect", "connection refused", "connection reset", "broken pipe", "bad connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// unavailable answers a request whose database work failed because the
// database is away.
func unavailable(c *fiber.Ctx) error {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds))
	c.Set("X-Flint-Database", "unavailable")
	if wantsHTML(c) {
		c.Set(fiber.HeaderCacheControl, "no-store")
		if isHX(c) {
			return c.SendStatus(http.StatusServiceUnavailable)
		}
		// The request's context has ended by the time the error handler
		// runs; the page needs nothing from it.
		var buf bytes.Buffer
		if err := views.DatabaseUnavailablePage(retryAfterSeconds).Render(context.Background(), &buf); err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
		return c.Status(http.StatusServiceUnavailable).Send(buf.Bytes())
	}
	return c.Status(http.StatusServiceUnavailable).JSON(errorBody{Error: errDatabaseUnavailable})
}

// wantsHTML reports whether the request is the dashboard's: an HTMX
// request, or a browser asking for a page outside the API.
func wantsHTML(c *fiber.Ctx) bool {
	if strings.HasPrefix(c.Path(), "/api/") {
		return false
	}
	return isHX(c) || strings.Contains(c.Get(fiber.HeaderAccept), "text/html")
}
