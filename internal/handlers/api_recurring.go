package handlers

import (
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

// scheduleID reads the {id} of a recurring series.
func scheduleID(c *fiber.Ctx) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return uuid.Nil, badRequest("invalid_id", "id", "the series id in the path must be a UUID")
	}
	return id, nil
}

// listRecurring handles GET /api/v1/recurring.
func (s *server) listRecurring(c *fiber.Ctx) error {
	list, err := s.scheduleStore.ListSchedules(c.UserContext())
	if err != nil {
		return err
	}
	if list == nil {
		list = []*domain.Schedule{}
	}
	return c.JSON(fiber.Map{"recurring": list})
}

// getRecurring handles GET /api/v1/recurring/{id}.
func (s *server) getRecurring(c *fiber.Ctx) error {
	id, err := scheduleID(c)
	if err != nil {
		return err
	}
	sc, err := s.scheduleStore.GetSchedule(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(sc)
}

// recurringAction handles POST /api/v1/recurring/{id}/pause and /resume.
func (s *server) recurringAction(action seriesAction) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := scheduleID(c)
		if err != nil {
			return err
		}
		sc, _, err := s.seriesOp(c, action, id)
		if err != nil {
			return err
		}
		return c.JSON(sc)
	}
}

// runRecurringNow handles POST /api/v1/recurring/{id}/run: one extra
// occurrence, now.
func (s *server) runRecurringNow(c *fiber.Ctx) error {
	id, err := scheduleID(c)
	if err != nil {
		return err
	}
	_, j, err := s.seriesOp(c, seriesRunNow, id)
	if err != nil {
		return err
	}
	return c.Status(http.StatusCreated).JSON(j)
}

// deleteRecurring handles DELETE /api/v1/recurring/{id}.
func (s *server) deleteRecurring(c *fiber.Ctx) error {
	id, err := scheduleID(c)
	if err != nil {
		return err
	}
	if _, _, err := s.seriesOp(c, seriesDelete, id); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"id": id, "deleted": true})
}
