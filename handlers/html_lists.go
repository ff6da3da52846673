// The jobs, dead-letter and bin lists, and their bulk actions.

package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
	"flint/views"
)

func (s *server) listData(c *fiber.Ctx, kind string) (views.JobsList, error) {
	l := views.JobsList{Kind: kind, Types: s.registry.Types()}
	l.Filter = views.JobsFilter{Status: c.Query("status"), Type: c.Query("type"), Queue: c.Query("queue"), Q: c.Query("q"), Cursor: c.Query("cursor")}
	if c.Method() == fiber.MethodPost {
		l.Filter = views.JobsFilter{Status: c.FormValue("status"), Type: c.FormValue("type"), Queue: c.FormValue("queue"), Q: c.FormValue("q")}
	}
	p := jobs.ListParams{Type: l.Filter.Type, Queue: l.Filter.Queue, Q: l.Filter.Q, Cursor: l.Filter.Cursor, Limit: 50}
	switch kind {
	case "dlq":
		p.Statuses = []jobs.State{jobs.StateDeadLetter}
		l.Filter.Status = ""
	case "bin":
		p.InBin = true
	}
	if l.Filter.Status != "" {
		st := jobs.State(l.Filter.Status)
		if !st.Valid() {
			l.Error = "Unknown status " + strconv.Quote(l.Filter.Status) + "."
			l.Filter.Status = ""
		} else {
			p.Statuses = []jobs.State{st}
		}
	}
	l.HasCursor = p.Cursor != ""
	page, err := s.store.ListJobs(c.UserContext(), p)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		l.Error = "Cannot filter that way: " + ve.Error()
		return l, nil
	}
	if err != nil {
		return l, err
	}
	l.Jobs, l.NextCursor = page.Jobs, page.NextCursor
	return l, nil
}

func (s *server) listPage(kind, title string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		l, err := s.listData(c, kind)
		if err != nil {
			return err
		}
		if isHX(c) && c.Get("HX-Target") == "jobs-table" {
			return render(c, http.StatusOK, views.JobsTable(l, s.clock.Now()))
		}
		if kind == "jobs" { // the queue filter's suggestions, outside the table
			if l.Queues, err = s.dash.Queues(c.UserContext()); err != nil {
				return err
			}
		}
		return render(c, http.StatusOK, views.JobsPage(s.chrome(c, title, kind, true), l))
	}
}

// bulk applies an action to the selected jobs of a list and re-renders it.
func (s *server) bulk(kind string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		action := jobAction(c.FormValue("action"))
		allowed := map[string][]jobAction{"jobs": {jobRetry, jobCancel, jobDelete}, "dlq": {jobRetry, jobDelete}, "bin": {jobRestore, jobPurge}}[kind]
		if !slices.Contains(allowed, action) {
			toast(c, "Unknown action.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		var ids []uuid.UUID
		for _, v := range c.Context().PostArgs().PeekMulti("ids") {
			id, err := uuid.ParseBytes(v)
			if err != nil {
				toast(c, "The selection held something that is not a job id.", toastBad)
				return c.SendStatus(http.StatusUnprocessableEntity)
			}
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			toast(c, "Select at least one job first.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		if len(ids) > 500 {
			toast(c, "Select at most 500 jobs at a time.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		done, refused, err := s.applyAll(c, action, ids)
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("%s: %d of %d jobs.", action.past(), done, len(ids))
		kindToast := toastOK
		if len(refused) > 0 {
			msg += " Not possible for " + strconv.Itoa(len(refused)) + ": " + refused[0]
			kindToast = toastBad
		}
		s.logger.InfoContext(c.UserContext(), "dashboard bulk action", "component", "dashboard", "action", action,
			"count", done, "actor", dashActor(c))
		toast(c, msg, kindToast)
		l, err := s.listData(c, kind)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.JobsTable(l, s.clock.Now()))
	}
}

// applyAll runs one action on many jobs and records what it did. It
// collects why jobs were refused (not found, not allowed from their
// state); any other error stops it and is returned, to surface as a 5xx
// rather than pass for a refusal.
func (s *server) applyAll(c *fiber.Ctx, action jobAction, ids []uuid.UUID) (done int, refused []string, err error) {
	ctx := c.UserContext()
	var applied []uuid.UUID
	defer func() {
		if len(applied) > 0 {
			s.audit(c, string(action), nil, applied...)
		}
	}()
	for _, id := range ids {
		if _, err := s.jobOp(ctx, action, id); err != nil {
			r := refusal(err)
			if r == nil {
				return len(applied), refused, err
			}
			refused = append(refused, r.Message)
			continue
		}
		applied = append(applied, id)
	}
	return len(applied), refused, nil
}

func (s *server) replayAll(c *fiber.Ctx) error {
	replayed, err := s.store.RetryDLQ(c.UserContext(), nil)
	if err != nil {
		return err
	}
	ids := make([]uuid.UUID, len(replayed))
	for i, j := range replayed {
		ids[i] = j.ID
	}
	s.wakeFor(replayed...)
	s.audit(c, "dlq_replay", map[string]any{"scope": "all", "replayed": len(ids)}, ids...)
	toast(c, fmt.Sprintf("Replayed %d jobs from the dead-letter queue.", len(replayed)), toastOK)
	l, err := s.listData(c, "dlq")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobsTable(l, s.clock.Now()))
}
