// The jobs, dead-letter and bin lists, and their bulk actions.

package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
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
	listKindParams(&l, &p)
	if kind == "jobs" {
		if err := s.statusCounts(c, &l); err != nil {
			return l, err
		}
	}
	if err := s.listTotals(c, &l, p); err != nil {
		return l, err
	}
	if kind == "dlq" && c.Query("view") == "errors" {
		groups, err := s.dlqStore.DLQGroups(c.UserContext(), 100)
		l.Groups = append([]domain.ErrorGroup{}, groups...)
		return l, err
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
		Series: c.Query("series"), Batch: c.Query("batch"), Sort: c.Query("sort"), Before: c.Query("before"), Cursor: c.Query("cursor"),
		Page: c.Query("page")}
}

// listFilterParams turns l's filter, but its status, into list parameters.
// A value it cannot read is dropped from the filter and explained in
// l.Error; an unknown series makes the page show nothing else (ok false).
func listFilterParams(l *views.JobsList) (p domain.ListParams, ok bool) {
	p = domain.ListParams{Type: l.Filter.Type, Queue: l.Filter.Queue, Q: l.Filter.Q, Cursor: l.Filter.Cursor, Limit: views.JobsPageSize}
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
	o, ok := views.OrderOf(l.Kind, l.Filter.Sort)
	if !ok {
		l.Error = "Unknown order " + strconv.Quote(l.Filter.Sort) + ": " + views.OrderHelp(l.Kind) + "."
		l.Filter.Sort = ""
	}
	p.By, p.Oldest = o.By, o.Oldest
	listPageParam(l, &p)
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

// listPageParam reads the page number a list jumps to (l.Page, p.Offset).
// With a cursor the number only labels the page the cursor starts.
func listPageParam(l *views.JobsList, p *domain.ListParams) {
	if l.Filter.Page == "" {
		if p.Cursor == "" {
			l.Page = 1
		}
		return
	}
	last := domain.MaxListOffset/views.JobsPageSize + 1
	n, err := strconv.Atoi(l.Filter.Page)
	if err != nil || n < 1 || n > last {
		l.Error = "Cannot jump to page " + strconv.Quote(l.Filter.Page) + ": give a page number from 1 to " + strconv.Itoa(last) + "."
		l.Filter.Page = ""
		return
	}
	l.Page = n
	if p.Cursor == "" {
		p.Offset = (n - 1) * views.JobsPageSize
	}
}

// countCapByListing bounds the count of a list that no kept count
// answers (a search, a jump, a series): it is counted by reading the
// matching jobs, at most this many.
const countCapByListing = 1000

// listTotals reads how many jobs the list's filter shows (l.Total, at
// least that many when l.TotalCapped) and, on the dead-letter queue and
// the bin, how many they hold in all (l.QueueTotal): exact from the kept
// counts where the filter allows, else counted by listing up to
// countCapByListing. A Jobs list that its filter does not narrow is not
// counted (HasTotal false): it offers no action on all its jobs.
func (s *server) listTotals(c *fiber.Ctx, l *views.JobsList, p domain.ListParams) error {
	ctx := c.UserContext()
	f := l.Filter
	byKept := f.Q == "" && f.Before == "" && f.Series == "" && f.Batch == ""
	var err error
	switch l.Kind {
	case "dlq":
		if l.QueueTotal, err = s.dlqStore.CountDeadLetter(ctx, "", ""); err != nil || !byKept {
			break
		}
		l.HasTotal = true
		l.Total, err = s.dlqStore.CountDeadLetter(ctx, p.Queue, p.Type)
		return err
	case "bin":
		if l.QueueTotal, err = s.dlqStore.CountBin(ctx, "", ""); err != nil || !byKept || f.Status != "" {
			break
		}
		l.HasTotal = true
		l.Total, err = s.dlqStore.CountBin(ctx, p.Queue, p.Type)
		return err
	default:
		if f.Status == "" && f.Type == "" && f.Queue == "" && byKept {
			return nil // the whole list, at most reordered
		}
		if n, ok := countFromCounts(l, byKept); ok {
			l.Total, l.HasTotal = n, true
			return nil
		}
	}
	if err != nil {
		return err
	}
	return s.countByListing(c, l, p)
}

// countFromCounts is the Jobs list's total from its counts per state,
// when they answer its filter (not scheduled jobs counted together with
// retrying ones when the list shows one of the two).
func countFromCounts(l *views.JobsList, byKept bool) (int64, bool) {
	if !byKept || l.Counts == nil {
		return 0, false
	}
	var n int64
	found := l.Filter.Status == ""
	for _, sc := range l.Counts {
		if l.Filter.Status == "" {
			n += sc.N
		} else if l.Filter.Status == sc.Status && !sc.Merged {
			n, found = sc.N, true
		}
	}
	return n, found
}

// countByListing counts the jobs p lists by reading them, up to
// countCapByListing (l.TotalCapped beyond).
func (s *server) countByListing(c *fiber.Ctx, l *views.JobsList, p domain.ListParams) error {
	l.HasTotal = true
	p.Limit, p.Cursor, p.Offset = 200, "", 0
	for l.Total < countCapByListing {
		page, err := s.jobStore.ListJobs(c.UserContext(), p)
		if err != nil {
			var ve *jobs.ValidationError
			if errors.As(err, &ve) {
				l.HasTotal = false
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

// listKindParams applies what l's kind implies to p (the dead-letter
// queue's one state, the bin), then its status filter (listStatusParams).
// A page and a bulk action on it select alike through it.
func listKindParams(l *views.JobsList, p *domain.ListParams) {
	switch l.Kind {
	case "dlq":
		p.Statuses = []jobs.State{jobs.StateDeadLetter}
		l.Filter.Status = ""
	case "bin":
		p.InBin = true
	}
	listStatusParams(l, p)
}

// listStatusParams applies l's status filter to p: a job state,
// "retrying" (scheduled jobs waiting for a retry; "scheduled" is the
// others), or "sleeping" (waiting jobs that sleep until a set time;
// "waiting" is those waiting for a signal or an event).
func listStatusParams(l *views.JobsList, p *domain.ListParams) {
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
			// A filter changed in place: the actions on all its jobs
			// follow it.
			return render(c, http.StatusOK, views.TableAndTotals(l, s.clock.Now()))
		}
		if isHX(c) && c.Get("HX-Target") == "status-counts" && kind == "jobs" {
			return render(c, http.StatusOK, views.StatusCounts(l))
		}
		if isHX(c) && c.Get("HX-Target") == "dlq-total" && kind != "jobs" {
			return render(c, http.StatusOK, views.DLQTotal(l, false))
		}
		if isHX(c) && c.Get("HX-Target") == "bulk-all" {
			return render(c, http.StatusOK, views.BulkAll(l, false))
		}
		if kind == "jobs" { // the queue filter's suggestions, outside the table
			if l.Queues, err = s.dash.Queues(c.UserContext()); err != nil {
				return err
			}
		}
		return render(c, http.StatusOK, views.JobsPage(s.chrome(c, title, kind, true), l))
	}
}
