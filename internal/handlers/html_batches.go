// The batches list and a batch's page.

package handlers

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// batchesPage handles GET /batches: the newest batches, or (to htmx and
// live refreshes) the table alone.
func (s *server) batchesPage(c *fiber.Ctx) error {
	cursor := c.Query("cursor")
	page, err := s.batchStore.ListBatches(c.UserContext(), cursor, 50)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		cursor = ""
		page, err = s.batchStore.ListBatches(c.UserContext(), "", 50)
	}
	if err != nil {
		return err
	}
	if isHX(c) {
		return render(c, http.StatusOK, views.BatchesTable(page, cursor))
	}
	return render(c, http.StatusOK, views.BatchesPage(s.chrome(c, "Batches", "batches", true), page, cursor))
}

// batchPage handles GET /batches/:id.
func (s *server) batchPage(c *fiber.Ctx) error {
	b, err := s.readBatch(c)
	if err != nil || b == nil {
		return err
	}
	return render(c, http.StatusOK, views.BatchPage(s.chrome(c, "Batch "+domain.ShortID(b.ID), "batches", true), b))
}

// batchLive handles GET /batches/:id/live: the part of the page that
// moves.
func (s *server) batchLive(c *fiber.Ctx) error {
	b, err := s.readBatch(c)
	if err != nil || b == nil {
		return err
	}
	return render(c, http.StatusOK, views.BatchLive(b, s.clock.Now()))
}

// readBatch reads the batch in the path; a missing one has been answered
// with the not-found page (nil, nil).
func (s *server) readBatch(c *fiber.Ctx) (*domain.Batch, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return nil, s.notFound(c)
	}
	b, err := s.batchStore.GetBatch(c.UserContext(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.notFound(c)
	}
	return b, err
}
