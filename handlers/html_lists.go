// The jobs, dead-letter and bin lists, and their bulk actions.

package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/jobs"
	"github.com/flinthq/flint/views"
)

// listData reads one page of the jobs, dead-letter ("dlq") or bin list
// kind, as the request's filter asks. A filter it cannot apply is shown
// on the page (l.Error), not returned.
func (s *server) listData(c *fiber.Ctx, kind string) (views.JobsList, error) {
	l := views.JobsList{Kind: kind, Types: s.types.Known()}
	l.Now = s.clock.Now()
	l.Filter = listFilter(c)
	p, ok := listFilterParams(&l)
	if !ok {
		return l, nil
	}
	switch kind {
	case "dlq":
		if done, err := s.dlqListData(c, &l, &p); done || err != nil {
			return l, err
		}
	case "bin":
		p.InBin = true
	}
	listStatusParams(&l, &p)
	if kind == "jobs" {
		if err := s.statusCounts(c, &l); err != nil {
			return l, err
		}
	}
	l.HasCursor = p.Cursor != ""
	page, err := s.jobStore.ListJobs(c.UserContext(), p)
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

// listFilter reads a list's filter from the query, or, for a bulk action
// (POST), from its form, which carries no cursor.
func listFilter(c *fiber.Ctx) views.JobsFilter {
	if c.Method() == fiber.MethodPost {
		return views.JobsFilter{Status: c.FormValue("status"), Type: c.FormValue("type"), Queue: c.FormValue("queue"), Q: c.FormValue("q"),
			Series: c.FormValue("series"), Batch: c.FormValue("batch"), Sort: c.FormValue("sort"), Before: c.FormValue("before")}
	}
	return views.JobsFilter{Status: c.Query("status"), Type: c.Query("type"), Queue: c.Query("queue"), Q: c.Query("q"),
		Series: c.Query("series"), Batch: c.Query("batch"), Sort: c.Query("sort"), Before: c.Query("before"), Cursor: c.Query("cursor")}
}

// listFilterParams turns l's filter, but its status, into list parameters.
// A value it cannot read is dropped from the filter and explained in
// l.Error; an unknown series makes the page show nothing else (ok false).
func listFilterParams(l *views.JobsList) (p jobs.ListParams, ok bool) {
	p = jobs.ListParams{Type: l.Filter.Type, Queue: l.Filter.Queue, Q: l.Filter.Q, Cursor: l.Filter.Cursor, Limit: views.JobsPageSize}
	if l.Filter.Series != "" {
		id, err := uuid.Parse(l.Filter.Series)
		if err != nil {
			l.Error = "Unknown recurring series " + strconv.Quote(l.Filter.Series) + ": give a series id from the Recurring page."
			l.Filter.Series = ""
			return p, false
		}
		p.ScheduleID = &id
	}
	if l.Filter.Batch != "" {
		id, err := uuid.Parse(l.Filter.Batch)
		if err != nil {
			l.Error = "Unknown batch " + strconv.Quote(l.Filter.Batch) + ": give a batch id from the Batches page."
			l.Filter.Batch = ""
			return p, false
		}
		p.BatchID = &id
	}
	switch l.Filter.Sort {
	case "":
	case "oldest":
		p.Oldest = true
	default:
		l.Error = "Unknown order " + strconv.Quote(l.Filter.Sort) + ": leave it out for newest first, or give oldest."
		l.Filter.Sort = ""
	}
	if l.Filter.Before != "" {
		at, err := time.ParseInLocation("2006-01-02T15:04", l.Filter.Before, time.UTC)
		if err != nil {
			l.Error = "Cannot jump to " + strconv.Quote(l.Filter.Before) + ": give a date and time such as 2026-12-01T09:30 (UTC)."
			l.Filter.Before = ""
		} else {
			p.Before = &at
		}
	}
	return p, true
}

// dlqListData narrows p to the dead-letter queue and reads its total. With
// view=errors it reads the error groups instead of a page of jobs (done).
func (s *server) dlqListData(c *fiber.Ctx, l *views.JobsList, p *jobs.ListParams) (done bool, err error) {
	p.Statuses = []jobs.State{jobs.StateDeadLetter}
	l.Filter.Status = ""
	if err := s.dlqTotals(c, l, *p); err != nil {
		return false, err
	}
	if c.Query("view") != "errors" {
		return false, nil
	}
	groups, err := s.dlqStore.DLQGroups(c.UserContext(), 100)
	if err != nil {
		return true, err
	}
	l.Groups = append([]jobs.ErrorGroup{}, groups...)
	return true, nil
}

// dlqCountCap bounds the count of a searched dead-letter queue: it is
// counted by reading the matching jobs, at most this many.
const dlqCountCap = 1000

// dlqTotals reads the dead-letter queue's size (l.QueueTotal) and how many
// of its jobs the filter shows (l.Total): exact from the kept counts when
// the filter is by queue and type alone; counted up to dlqCountCap
// (l.TotalCapped) for a search or a jump.
func (s *server) dlqTotals(c *fiber.Ctx, l *views.JobsList, p jobs.ListParams) error {
	ctx := c.UserContext()
	var err error
	if l.QueueTotal, err = s.dlqStore.CountDeadLetter(ctx, "", ""); err != nil {
		return err
	}
	if p.Q == "" && p.Before == nil {
		l.Total, err = s.dlqStore.CountDeadLetter(ctx, p.Queue, p.Type)
		return err
	}
	p.Limit, p.Cursor = 200, ""
	for l.Total < dlqCountCap {
		page, err := s.jobStore.ListJobs(ctx, p)
		if err != nil {
			var ve *jobs.ValidationError
			if errors.As(err, &ve) {
				return nil // the listing says why
			}
			return err
		}
		l.Total += int64(len(page.Jobs))
		if page.NextCursor == "" {
			return nil
		}
		p.Cursor = page.NextCursor
	}
	l.TotalCapped = true
	return nil
}

// statusCounts reads the Jobs list's counts per state (l.Counts) for its
// queue or type filter, from the same counts as GET /api/v1/stats.
func (s *server) statusCounts(c *fiber.Ctx, l *views.JobsList) error {
	f := l.Filter
	if f.Q != "" || f.Series != "" || f.Batch != "" || (f.Type != "" && f.Queue != "") {
		return nil
	}
	st, err := s.statusStore.Stats(c.UserContext())
	if err != nil {
		return err
	}
	by := st.ByStatus
	switch {
	case f.Queue != "":
		by = st.ByQueue[f.Queue]
	case f.Type != "":
		by = st.ByType[f.Type]
	}
	retrying, sleeping, merged := int64(0), int64(0), true
	if f.Queue == "" && f.Type == "" {
		if retrying, err = s.dash.CountRetrying(c.UserContext(), countCap); err != nil {
			return err
		}
		if sleeping, err = s.dash.CountSleeping(c.UserContext(), countCap); err != nil {
			return err
		}
		merged = false
	}
	for _, state := range jobs.States {
		n := by[string(state)]
		if state == jobs.StateScheduled {
			l.Counts = append(l.Counts, views.StatusCount{Status: string(state), N: n - retrying, Merged: merged})
			if !merged {
				l.Counts = append(l.Counts, views.StatusCount{Status: "retrying", N: retrying})
			}
			continue
		}
		if state == jobs.StateWaiting {
			l.Counts = append(l.Counts, views.StatusCount{Status: string(state), N: max(n-sleeping, 0), Merged: merged})
			if !merged {
				l.Counts = append(l.Counts, views.StatusCount{Status: "sleeping", N: sleeping})
			}
			continue
		}
		l.Counts = append(l.Counts, views.StatusCount{Status: string(state), N: n})
	}
	return nil
}

// listStatusParams applies l's status filter to p: a job state,
// "retrying" (scheduled jobs waiting for a retry; "scheduled" is the
// others), or "sleeping" (waiting jobs that sleep until a set time;
// "waiting" is those waiting for a signal or an event).
func listStatusParams(l *views.JobsList, p *jobs.ListParams) {
	if l.Filter.Status == "retrying" || l.Filter.Status == string(jobs.StateScheduled) {
		retrying := l.Filter.Status == "retrying"
		p.Statuses, p.Retrying = []jobs.State{jobs.StateScheduled}, &retrying
	} else if l.Filter.Status == "sleeping" || l.Filter.Status == string(jobs.StateWaiting) {
		sleeping := l.Filter.Status == "sleeping"
		p.Statuses, p.Sleeping = []jobs.State{jobs.StateWaiting}, &sleeping
	} else if l.Filter.Status != "" {
		st := jobs.State(l.Filter.Status)
		if !st.Valid() {
			l.Error = "Unknown status " + strconv.Quote(l.Filter.Status) + "."
			l.Filter.Status = ""
		} else {
			p.Statuses = []jobs.State{st}
		}
	}
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
		if isHX(c) && c.Get("HX-Target") == "status-counts" && kind == "jobs" {
			return render(c, http.StatusOK, views.StatusCounts(l))
		}
		if isHX(c) && c.Get("HX-Target") == "dlq-total" && kind == "dlq" {
			return render(c, http.StatusOK, views.DLQTotal(l, false))
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

// deleteAllDLQ handles POST /dlq/delete-all: every dead-letter job to the
// bin, where it can be restored until the bin is emptied.
func (s *server) deleteAllDLQ(c *fiber.Ctx) error {
	ids, err := s.dlqStore.DeleteDLQ(c.UserContext())
	if err != nil {
		return err
	}
	s.audit(c, "dlq_delete", map[string]any{"scope": "all", "deleted": len(ids)}, ids...)
	toast(c, fmt.Sprintf("Moved %d jobs from the dead-letter queue to the bin.", len(ids)), toastOK)
	l, err := s.listData(c, "dlq")
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.DLQTableAndTotal(l, s.clock.Now()))
}

func (s *server) replayAll(c *fiber.Ctx) error {
	replayed, err := s.dlqStore.RetryDLQ(c.UserContext(), nil)
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
	return render(c, http.StatusOK, views.DLQTableAndTotal(l, s.clock.Now()))
}
