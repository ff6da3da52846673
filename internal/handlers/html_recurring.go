// The recurring series and workers pages.

package handlers

import (
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
)

func (s *server) recurringPage(c *fiber.Ctx) error {
	list, err := s.scheduleStore.ListSchedules(c.UserContext())
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "recurring-table" {
		return render(c, http.StatusOK, views.RecurringTable(list, s.clock.Now()))
	}
	return render(c, http.StatusOK, views.RecurringPage(s.chrome(c, "Recurring", "recurring", true), list))
}

func (s *server) recurringActionHTML(action seriesAction) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return s.notFound(c)
		}
		if _, _, err := s.seriesOp(c, action, id); err != nil {
			r := refusal(err)
			if r == nil {
				return err
			}
			toast(c, "Not possible: "+r.Message, toastBad)
			return c.SendStatus(r.Status)
		}
		toast(c, map[seriesAction]string{seriesPause: "Series paused.", seriesResume: "Series resumed.",
			seriesRunNow: "An extra occurrence was enqueued.", seriesDelete: "Series deleted."}[action], toastOK)
		list, err := s.scheduleStore.ListSchedules(c.UserContext())
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.RecurringTable(list, s.clock.Now()))
	}
}

func (s *server) workersPage(c *fiber.Ctx) error {
	ws, err := s.workers(c.UserContext())
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "workers-live" {
		return render(c, http.StatusOK, views.WorkersTable(ws, s.clock.Now()))
	}
	return render(c, http.StatusOK, views.WorkersPage(s.chrome(c, "Workers", "workers", true), ws))
}

// workerStateHTML handles POST /workers/{id}/quiet and /terminate: an
// operator asks a remote worker to stop claiming, or to stop. The table
// comes back with the worker's new state.
func (s *server) workerStateHTML(state string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if s.work == nil {
			return fiber.ErrNotFound
		}
		id := c.Params("id")
		if err := s.work.cfg.Store.SetWorkerState(c.UserContext(), id, state); err != nil {
			if errors.Is(err, domain.ErrNotFound) {
				toast(c, "That worker is gone, or is a Flint process (stop it as you started it).", toastBad)
			} else {
				return err
			}
		} else {
			s.work.cache.Delete(id)
			s.audit(c, "worker_"+state, map[string]any{"worker_id": id})
			toast(c, "Asked worker "+id+" to "+map[string]string{domain.WorkerQuiet: "quiet down", domain.WorkerTerminate: "stop"}[state]+"; it learns on its next heartbeat.", toastOK)
		}
		ws, err := s.workers(c.UserContext())
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.WorkersTable(ws, s.clock.Now()))
	}
}
