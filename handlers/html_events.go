package handlers

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
	"flint/views"
)

// dashboardEvents handles GET /events, the dashboard's live stream. Broker
// events carry ids and states only; this handler turns them into what the
// page swaps:
//
//	view=overview      event "stats" (at most once a second): the page refetches its counts
//	view=job&id=…      event "job-<id>": the page refetches the job's live part
//	view=list&ids=…    event "job-<id>" with the re-rendered table row, read fresh from
//	                   the database; with kind=jobs|dlq (first page), event "jobs-new"
//	                   when a job that belongs on the page appears
func (s *server) dashboardEvents(c *fiber.Ctx) error {
	view := c.Query("view")
	var f eventFilter
	onPage := map[uuid.UUID]bool{}
	kind := c.Query("kind")
	switch view {
	case "overview":
	case "job":
		id, err := uuid.Parse(c.Query("id"))
		if err != nil {
			return invalid("id", "must be a job id")
		}
		f.jobID = id
	case "list":
		for _, part := range strings.Split(c.Query("ids"), ",") {
			if part == "" {
				continue
			}
			id, err := uuid.Parse(part)
			if err != nil || len(onPage) >= 500 {
				return invalid("ids", "must be up to 500 job ids")
			}
			onPage[id] = true
		}
		if kind == "" {
			f.jobIDs = onPage
		}
	default:
		return invalid("view", "must be overview, job or list")
	}
	sub, _, _ := s.broker.subscribe(f, "")
	return s.openEventStream(c, func(ctx context.Context, w *bufio.Writer) {
		defer s.broker.unsubscribe(sub)
		s.streamDashboard(ctx, w, sub, view, kind, onPage)
	})
}

// streamDashboard coalesces events over short windows (a busy system sends
// thousands a second; a page needs a handful) and writes what the view
// swaps.
func (s *server) streamDashboard(ctx context.Context, w *bufio.Writer, sub *subscriber, view, kind string, onPage map[uuid.UUID]bool) {
	if w.Flush() != nil {
		return
	}
	window := 250 * time.Millisecond
	if view == "overview" {
		window = time.Second
	}
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	changed := map[uuid.UUID]bool{}
	newJobs := false
	var flush <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.gone:
			return
		case be := <-sub.ch:
			e := be.ev
			switch {
			case view != "list" || onPage[e.JobID]:
				changed[e.JobID] = true
			case kind == "jobs" && e.Attempt == 0 && e.Status.Waiting():
				newJobs = true
			case kind == "dlq" && e.Status == jobs.StateDeadLetter:
				newJobs = true
			}
			if flush == nil && (len(changed) > 0 || newJobs) {
				flush = time.After(window)
			}
			continue
		case <-flush:
			flush = nil
			s.writeDashboard(w, view, kind, changed, newJobs)
			clear(changed)
			newJobs = false
		case <-beat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		if w.Flush() != nil {
			return
		}
	}
}

func (s *server) writeDashboard(w *bufio.Writer, view, kind string, changed map[uuid.UUID]bool, newJobs bool) {
	switch view {
	case "overview":
		fmt.Fprint(w, "event: stats\ndata: changed\n\n")
	case "job":
		for id := range changed {
			fmt.Fprintf(w, "event: %s\ndata: changed\n\n", views.JobRowID(id))
		}
	case "list":
		ctx, cancel := context.WithTimeout(s.base, 5*time.Second)
		defer cancel()
		now := s.clock.Now()
		ids := slices.Collect(maps.Keys(changed))
		// Jobs purged meanwhile are simply missing: their rows stay as
		// they are. On an error the rows wait for the next change.
		js, _ := s.store.GetJobs(ctx, ids)
		for _, j := range js {
			if writeHTMLEvent(ctx, w, views.JobRowID(j.ID), views.JobRow(j, kind, now)) != nil {
				return
			}
		}
		if newJobs {
			fmt.Fprint(w, "event: jobs-new\ndata: new\n\n")
		}
	}
}
