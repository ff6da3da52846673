package handlers

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// DashboardStore is what the dashboard needs beyond the API's Store.
type DashboardStore interface {
	SessionStore
	// CappedCounts counts jobs per state; a count of a live state stops
	// at limit and then comes with the planner's estimate (Capped).
	CappedCounts(ctx context.Context, states []jobs.State, limit int64) ([]domain.StateCount, error)
	// RecentFailures returns up to limit of the latest failed or
	// interrupted runs of queue (every queue when empty), one per job.
	RecentFailures(ctx context.Context, queue string, limit int) ([]domain.Failure, error)
	// Queues lists the queues that hold live jobs.
	Queues(ctx context.Context) ([]string, error)
	// Throughput returns finished runs per minute over the last hour.
	Throughput(ctx context.Context) ([]domain.ThroughputBucket, error)
	// CountRetrying counts the jobs waiting for a retry, up to limit.
	CountRetrying(ctx context.Context, limit int64) (int64, error)
	// CountSleeping counts the waiting jobs that sleep, up to limit.
	CountSleeping(ctx context.Context, limit int64) (int64, error)
	// ThroughputOver returns finished runs of queue (every queue when
	// empty) per step (whole minutes) over the last span (at most two
	// days), oldest first.
	ThroughputOver(ctx context.Context, queue string, span, step time.Duration) ([]domain.ThroughputBucket, error)
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
	return u.Email + "@" + clientAddr(c)
}
