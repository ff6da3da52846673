package handlers

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// cached keeps the last value of an expensive read for ttl: the stats and
// the overview count the live rows, and every open dashboard, scraper and
// poller asks for them at once. Callers arriving while it loads wait for
// that load instead of starting their own.
type cached[T any] struct {
	mu  sync.Mutex
	ttl time.Duration
	at  time.Time
	ok  bool
	val T
}

func (c *cached[T]) get(ctx context.Context, load func(context.Context) (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && time.Since(c.at) < c.ttl {
		return c.val, nil
	}
	v, err := load(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	c.val, c.at, c.ok = v, time.Now(), true
	return v, nil
}

// getStats handles GET /api/v1/stats.
func (s *server) getStats(c *fiber.Ctx) error {
	st, err := s.stats.get(c.UserContext(), s.statusStore.Stats)
	if err != nil {
		return err
	}
	return c.JSON(st)
}

// healthz is liveness: the process serves requests. It reports the
// database's state without failing on it.
func (s *server) healthz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	db := "ok"
	status := "ok"
	if err := s.statusStore.Ping(ctx); err != nil {
		db, status = "unreachable", "degraded"
	}
	redis := s.redis()
	if redis == "down" {
		status = "degraded"
	}
	return c.JSON(fiber.Map{"status": status, "database": db, "redis": redis})
}

// readyz is readiness: 200 when the database answers and takes writes,
// 503 (with Retry-After) otherwise. It names the server the pool is on,
// so an operator can watch a failover land.
func (s *server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	srv, err := s.statusStore.Server(ctx)
	if err != nil {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds))
		return c.Status(http.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "database": "unreachable"})
	}
	if srv.ReadOnly {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds))
		return c.Status(http.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "database": "read_only", "server": srv})
	}
	return c.JSON(fiber.Map{"status": "ready", "database": "ok", "server": srv})
}

// listWorkers handles GET /api/v1/workers: live worker processes with the
// jobs each is running.
func (s *server) listWorkers(c *fiber.Ctx) error {
	ws, err := s.workers(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"workers": ws})
}
