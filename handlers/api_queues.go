package handlers

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
)

// listDLQ handles GET /api/v1/dlq: dead-letter jobs, newest first.
func (s *server) listDLQ(c *fiber.Ctx) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	if len(p.Statuses) > 0 {
		return invalid("status", "the DLQ lists dead_letter jobs only; use /api/v1/jobs to filter by status")
	}
	p.Statuses = []jobs.State{jobs.StateDeadLetter}
	page, err := s.store.ListJobs(c.UserContext(), p)
	if err != nil {
		return err
	}
	return c.JSON(pageResponse(page))
}

// dlqRetryRequest is the body of POST /api/v1/dlq/retry.
type dlqRetryRequest struct {
	IDs []string `json:"ids"`
}

// retryDLQ handles POST /api/v1/dlq/retry: replay the given dead-letter
// jobs, or all of them when no ids are given.
func (s *server) retryDLQ(c *fiber.Ctx) error {
	var req dlqRetryRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	var ids []uuid.UUID
	if req.IDs != nil {
		if len(req.IDs) == 0 {
			return invalid("ids", "is empty; omit it to replay the whole DLQ")
		}
		if len(req.IDs) > MaxBatch {
			return invalid("ids", fmt.Sprintf("holds %d ids; the limit is %d", len(req.IDs), MaxBatch))
		}
		ids = make([]uuid.UUID, len(req.IDs))
		for i, v := range req.IDs {
			id, err := uuid.Parse(v)
			if err != nil {
				return invalid(fmt.Sprintf("ids[%d]", i), "must be a job id (UUID)")
			}
			ids[i] = id
		}
	}
	replayed, err := s.store.RetryDLQ(c.UserContext(), ids)
	if err != nil {
		return err
	}
	out := make([]uuid.UUID, len(replayed))
	scope := "selected"
	if ids == nil {
		scope = "all"
	}
	for i, j := range replayed {
		out[i] = j.ID
	}
	s.wakeFor(replayed...)
	s.audit(c, "dlq_replay", map[string]any{"scope": scope, "replayed": len(out)}, out...)
	return c.Status(http.StatusOK).JSON(fiber.Map{"replayed": len(out), "ids": out})
}

// listBin handles GET /api/v1/bin: soft-deleted jobs, most recent first.
func (s *server) listBin(c *fiber.Ctx) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	p.InBin = true
	page, err := s.store.ListJobs(c.UserContext(), p)
	if err != nil {
		return err
	}
	return c.JSON(pageResponse(page))
}

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
	st, err := s.stats.get(c.UserContext(), s.store.Stats)
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
	if err := s.store.Ping(ctx); err != nil {
		db, status = "unreachable", "degraded"
	}
	redis := s.redis()
	if redis == "down" {
		status = "degraded"
	}
	return c.JSON(fiber.Map{"status": status, "database": db, "redis": redis})
}

// readyz is readiness: 200 when the database answers, 503 otherwise.
func (s *server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return c.Status(http.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "database": "unreachable"})
	}
	return c.JSON(fiber.Map{"status": "ready", "database": "ok"})
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
