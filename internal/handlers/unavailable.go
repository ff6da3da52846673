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
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/views"
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

// When PostgreSQL's disk is full (SQLSTATE 53100, disk_full) it still
// answers reads but refuses writes until space is freed; the API answers
// what it refuses 503 database_disk_full with a longer Retry-After, and
// the dashboard names the cause (X-Flint-Database: disk-full, and a banner
// on every page while the store saw the error within db.DiskFullWindow).
// Nothing needs a restart: the next write after space is freed succeeds.

// diskFullRetrySeconds is the Retry-After of disk-full answers: freeing
// space takes an operator.
const diskFullRetrySeconds = 30

// errDiskFull is the API's answer while the database's disk is full.
var errDiskFull = &apiError{Status: http.StatusServiceUnavailable, Code: "database_disk_full",
	Message: "the database server's disk is full, so it refuses writes; nothing accepted is lost, and Flint resumes by itself once space is freed; retry later"}

// diskWatcher is what the store says about the database's disk; *db.Store
// implements it.
type diskWatcher interface {
	// DiskFullSeen reports whether a write failed for want of space
	// lately, and when the last one did.
	DiskFullSeen() (time.Time, bool)
}

// diskFull reports whether err is PostgreSQL's disk_full.
func diskFull(err error) bool {
	var st sqlStater
	return errors.As(err, &st) && st.SQLState() == "53100"
}

// diskFullAnswer answers a request whose write the database refused for
// want of space.
func diskFullAnswer(c *fiber.Ctx) error {
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(diskFullRetrySeconds))
	c.Set("X-Flint-Database", "disk-full")
	if wantsHTML(c) {
		c.Set(fiber.HeaderCacheControl, "no-store")
		if isHX(c) {
			return c.SendStatus(http.StatusServiceUnavailable)
		}
		var buf bytes.Buffer
		if err := views.DatabaseUnavailablePage(diskFullRetrySeconds, true).Render(context.Background(), &buf); err != nil {
			return err
		}
		c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
		return c.Status(http.StatusServiceUnavailable).Send(buf.Bytes())
	}
	return c.Status(http.StatusServiceUnavailable).JSON(errorBody{Error: errDiskFull})
}

// diskNotice marks dashboard pages while the database's disk is full:
// X-Flint-Database: disk-full on the answer (dashboard.js shows the banner
// on HTMX swaps) and the banner in the page itself (views.WithDiskFull).
func (s *server) diskNotice(c *fiber.Ctx) error {
	if s.disk != nil {
		if _, full := s.disk.DiskFullSeen(); full {
			c.Set("X-Flint-Database", "disk-full")
			c.SetUserContext(views.WithDiskFull(c.UserContext()))
		}
	}
	return c.Next()
}

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
		if err := views.DatabaseUnavailablePage(retryAfterSeconds, false).Render(context.Background(), &buf); err != nil {
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
