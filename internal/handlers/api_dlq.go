package handlers

import (
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/jobs"
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
	page, err := s.jobStore.ListJobs(c.UserContext(), p)
	if err != nil {
		return err
	}
	return c.JSON(pageResponse(c, page))
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
	replayed, err := s.dlqStore.RetryDLQ(c.UserContext(), ids)
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
	page, err := s.jobStore.ListJobs(c.UserContext(), p)
	if err != nil {
		return err
	}
	return c.JSON(pageResponse(c, page))
}
