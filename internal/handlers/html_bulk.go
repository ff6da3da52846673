// Bulk actions of the jobs, dead-letter and bin lists: on the jobs
// selected, or on every job the list's filter shows.

package handlers

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// An action on every job a filter shows touches at most views.BulkMax jobs
// (the first in the list's order; the toast says when more were left for
// another run), in batches of bulkBatch, one transaction each, so no
// statement holds many locks for long.
const bulkBatch = 500

// maxSelected is how many selected jobs one action takes.
const maxSelected = 500

// bulkActions are the actions each list offers, on a selection.
var bulkActions = map[string][]jobAction{"jobs": {jobRetry, jobCancel, jobDelete}, "dlq": {jobRetry, jobDelete}, "bin": {jobRestore, jobPurge}}

// bulkAllActions are those it offers on every job its filter shows: no
// purge, which cannot be undone.
var bulkAllActions = map[string][]jobAction{"jobs": {jobRetry, jobCancel, jobDelete}, "dlq": {jobRetry, jobDelete}, "bin": {jobRestore}}

// bulk applies an action to the selected jobs of a list, or with
// scope=filter to every job its filter shows, and re-renders it.
func (s *server) bulk(kind string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		action := jobAction(c.FormValue("action"))
		if c.FormValue("scope") == "filter" {
			if !slices.Contains(bulkAllActions[kind], action) {
				toast(c, "Unknown action for every job of the list.", toastBad)
				return c.SendStatus(http.StatusUnprocessableEntity)
			}
			return s.bulkFilter(c, kind, action)
		}
		if !slices.Contains(bulkActions[kind], action) {
			toast(c, "Unknown action.", toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		ids, msg := selectedIDs(c)
		if msg != "" {
			toast(c, msg, toastBad)
			return c.SendStatus(http.StatusUnprocessableEntity)
		}
		done, refused, err := s.applyAll(c, action, ids)
		if err != nil {
			return err
		}
		msg = fmt.Sprintf("%s: %d of %d jobs.", action.past(), done, len(ids))
		kindToast := toastOK
		if len(refused) > 0 {
			msg += " Not possible for " + strconv.Itoa(len(refused)) + ": " + refused[0]
			kindToast = toastBad
		}
		s.logger.InfoContext(c.UserContext(), "dashboard bulk action", "component", "dashboard", "action", action,
			"count", done, "actor", dashActor(c))
		toast(c, msg, kindToast)
		return s.renderAfterBulk(c, kind)
	}
}

// selectedIDs reads the selection of a bulk form, or says what is wrong
// with it.
func selectedIDs(c *fiber.Ctx) ([]uuid.UUID, string) {
	var ids []uuid.UUID
	for _, v := range c.Context().PostArgs().PeekMulti("ids") {
		id, err := uuid.ParseBytes(v)
		if err != nil {
			return nil, "The selection held something that is not a job id."
		}
		ids = append(ids, id)
	}
	switch {
	case len(ids) == 0:
		return nil, "Select at least one job first."
	case len(ids) > maxSelected:
		return nil, fmt.Sprintf("Select at most %d jobs at a time, or act on every job the filter shows.", maxSelected)
	}
	return ids, ""
}

// renderAfterBulk answers a bulk action with the list's table as it now
// is, and its totals beside it.
func (s *server) renderAfterBulk(c *fiber.Ctx, kind string) error {
	l, err := s.listData(c, kind)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.TableAndTotals(l, s.clock.Now()))
}

// deleteAllDLQ handles POST /dlq/delete-all: every dead-letter job the
// filter shows to the bin, where it can be restored until the bin is
// emptied.
func (s *server) deleteAllDLQ(c *fiber.Ctx) error { return s.bulkFilter(c, "dlq", jobDelete) }

// replayAll handles POST /dlq/replay-all: every dead-letter job the filter
// shows runs again from attempt 1.
func (s *server) replayAll(c *fiber.Ctx) error { return s.bulkFilter(c, "dlq", jobRetry) }

// bulkFilter applies action to every job the list's filter (sent with the
// form) shows, up to views.BulkMax, and records it with that filter.
func (s *server) bulkFilter(c *fiber.Ctx, kind string, action jobAction) error {
	ids, more, f, err := s.matching(c, kind)
	if r := refusal(err); err != nil && r != nil {
		toast(c, "Cannot act on this filter: "+r.Message, toastBad)
		return c.SendStatus(http.StatusUnprocessableEntity)
	} else if err != nil {
		return err
	}
	done, err := s.applyMany(c, kind, action, ids)
	if len(done) > 0 {
		s.audit(c, bulkAuditName(kind, action), map[string]any{"scope": "filter", "filter": filterDetails(kind, f),
			"matched": len(ids), "done": len(done), "more": more}, done...)
	}
	if err != nil {
		return err
	}
	s.logger.InfoContext(c.UserContext(), "dashboard bulk action on a filter", "component", "dashboard", "list", kind,
		"action", action, "matched", len(ids), "count", len(done), "actor", dashActor(c))
	did := action.past()
	if kind == "dlq" && action == jobRetry {
		did = "Replayed"
	}
	msg := fmt.Sprintf("%s: %d of the %d jobs the filter showed.", did, len(done), len(ids))
	if len(ids) == 0 {
		msg = "No job matches this filter any more: nothing was done."
	}
	kindToast := toastOK
	if left := len(ids) - len(done); left > 0 {
		msg += " " + strconv.Itoa(left) + " could not be: their state does not allow it (or changed meanwhile)."
		kindToast = toastBad
	}
	if more {
		msg += fmt.Sprintf(" One action touches at most %s jobs: run it again for the rest.", views.Thousands(views.BulkMax))
	}
	toast(c, msg, kindToast)
	return s.renderAfterBulk(c, kind)
}

// bulkAuditName is how the audit trail names a bulk action on a filter:
// as the dead-letter queue's replay and delete always were, else as the
// action on one job.
func bulkAuditName(kind string, action jobAction) string {
	if kind == "dlq" {
		return map[jobAction]string{jobRetry: "dlq_replay", jobDelete: "dlq_delete"}[action]
	}
	return string(action)
}

// filterDetails is a list's filter as the audit trail records it: the
// fields given.
func filterDetails(kind string, f views.JobsFilter) map[string]string {
	out := map[string]string{"list": kind}
	for k, v := range map[string]string{"status": f.Status, "type": f.Type, "queue": f.Queue, "q": f.Q, "series": f.Series,
		"batch": f.Batch, "sort": f.Sort, "before": f.Before} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// matching reads the filter a bulk form carries and lists the ids of the
// jobs it shows, in the list's order, up to views.BulkMax; more says
// there were more. A filter it cannot apply is a 422 naming the field.
func (s *server) matching(c *fiber.Ctx, kind string) (ids []uuid.UUID, more bool, f views.JobsFilter, err error) {
	l := views.JobsList{Kind: kind, Filter: listFilter(c)}
	p, ok := listFilterParams(&l)
	listKindParams(&l, &p)
	if !ok || l.Error != "" {
		return nil, false, l.Filter, &apiError{Status: http.StatusUnprocessableEntity, Code: "invalid", Message: l.Error}
	}
	p.Limit, p.Cursor, p.Offset = bulkBatch, "", 0
	for len(ids) < views.BulkMax {
		p.Limit = min(bulkBatch, views.BulkMax-len(ids))
		page, err := s.jobStore.ListJobs(c.UserContext(), p)
		if err != nil {
			return nil, false, l.Filter, err
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			return ids, false, l.Filter, nil
		}
		p.Cursor = page.NextCursor
	}
	return ids, true, l.Filter, nil
}

// applyMany applies action to ids in batches of bulkBatch, one
// transaction each. It returns the jobs it changed; the others were not in
// a state that allows it (gone meanwhile, or never eligible).
func (s *server) applyMany(c *fiber.Ctx, kind string, action jobAction, ids []uuid.UUID) (done []uuid.UUID, err error) {
	ctx := c.UserContext()
	for batch := range slices.Chunk(ids, bulkBatch) {
		var js []*jobs.Job
		var moved []uuid.UUID
		switch {
		case kind == "dlq" && action == jobRetry:
			js, err = s.dlqStore.RetryDLQ(ctx, batch)
		case kind == "dlq" && action == jobDelete:
			moved, err = s.dlqStore.DeleteDLQ(ctx, batch)
		case action == jobRestore:
			js, err = s.jobActionStore.RestoreJobs(ctx, batch)
		case action == jobRetry:
			js, err = s.jobActionStore.RetryJobs(ctx, batch)
		case action == jobCancel:
			js, err = s.jobActionStore.CancelJobs(ctx, batch)
		case action == jobDelete:
			js, err = s.jobActionStore.DeleteJobs(ctx, batch)
		default:
			return done, fmt.Errorf("no bulk %s on the %s list", action, kind)
		}
		s.wakeFor(js...)
		for _, j := range js {
			moved = append(moved, j.ID)
		}
		done = append(done, moved...)
		if err != nil {
			return done, err
		}
	}
	return done, nil
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
