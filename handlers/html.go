package handlers

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"flint/auth"
	"flint/jobs"
	"flint/views"
)

// DashboardStore is what the dashboard needs beyond the API's Store.
type DashboardStore interface {
	SessionStore
	CappedCounts(ctx context.Context, states []jobs.State, limit int64) ([]jobs.StateCount, error)
	RecentFailures(ctx context.Context, limit int) ([]jobs.Failure, error)
	Queues(ctx context.Context) ([]string, error)
	Throughput(ctx context.Context) ([]jobs.ThroughputBucket, error)
}

// countCap bounds every count the dashboard shows, so no page ever counts a
// whole million-row table.
const countCap = 100_000

// chrome builds the page frame for the signed-in user.
// chrome is the frame of a page; live pages show the live indicator.
func (s *server) chrome(c *fiber.Ctx, title, nav string, live bool) views.Chrome {
	u, _ := c.Locals(userKey).(auth.User)
	csrf, _ := c.Locals(csrfKey).(string)
	return views.Chrome{Title: title, Nav: nav, User: u.Email, Role: string(u.Role), CSRF: csrf, MailURL: s.mailURL, Now: s.clock.Now(), Live: live}
}

// dashActor names the signed-in user for records of what they changed.
func dashActor(c *fiber.Ctx) string {
	u, _ := c.Locals(userKey).(auth.User)
	return u.Email + "@" + c.IP()
}
