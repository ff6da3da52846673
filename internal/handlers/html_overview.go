// The overview page and its live part.

package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// overviewData is what the overview shows, shared by every open overview
// for a second (they all refresh on the same event).
func (s *server) overviewData(ctx context.Context) (views.Overview, error) {
	o, err := s.overview.get(ctx, s.loadOverview)
	if err != nil || s.alerts == nil {
		return o, err
	}
	// Firing alerts are read fresh (one indexed read): an alert that
	// fires just after the counts were cached still shows at once.
	o.Firing, err = s.alerts.ListAlerts(ctx, domain.AlertQuery{Status: "firing", Limit: 5})
	return o, err
}

func (s *server) loadOverview(ctx context.Context) (views.Overview, error) {
	var o views.Overview
	var err error
	if o.Counts, err = s.dash.CappedCounts(ctx, jobs.States, countCap); err != nil {
		return o, err
	}
	for _, sc := range o.Counts {
		if sc.State == jobs.StateDeadLetter {
			o.DLQ, o.DLQCapped = sc.Count, sc.Capped
		}
	}
	if o.Throughput, err = s.dash.Throughput(ctx); err != nil {
		return o, err
	}
	for _, b := range o.Throughput {
		o.CompletedHour += b.Outcomes["succeeded"]
		o.FailedHour += b.Outcomes["failed"]
	}
	if o.Workers, err = s.workers(ctx); err != nil {
		return o, err
	}
	if o.RecentFailures, err = s.dash.RecentFailures(ctx, "", 8); err != nil {
		return o, err
	}
	if o.Retrying, err = s.dash.CountRetrying(ctx, countCap); err != nil {
		return o, err
	}
	o.RetryingCapped = o.Retrying >= countCap
	if o.Sleeping, err = s.dash.CountSleeping(ctx, countCap); err != nil {
		return o, err
	}
	o.SleepingCapped = o.Sleeping >= countCap
	qs, err := s.queueStore.ListQueues(ctx)
	if err != nil {
		return o, err
	}
	o.Queues = views.BusiestQueues(qs, 8)
	return o, nil
}

func (s *server) overviewPage(c *fiber.Ctx) error {
	o, err := s.overviewData(c.UserContext())
	if err == nil {
		err = s.overviewRange(c, &o)
	}
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewPage(s.chrome(c, "Overview", "overview", true), o))
}

func (s *server) overviewLive(c *fiber.Ctx) error {
	o, err := s.overviewData(c.UserContext())
	if err == nil {
		err = s.overviewRange(c, &o)
	}
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewLive(o, s.clock.Now()))
}

// overviewRange sets the throughput chart's span from ?range= (1h, 6h, 24h
// or 48h); beyond the cached last hour it reads the throughput afresh.
func (s *server) overviewRange(c *fiber.Ctx, o *views.Overview) error {
	name := c.Query("range")
	r, ok := views.ChartRangeNamed(name)
	if !ok && name != "" {
		o.RangeError = "There is no range " + strconv.Quote(name) + "; give 1h, 6h, 24h or 48h. Showing the last hour."
	}
	o.Range = r
	if r.Span == time.Hour {
		return nil
	}
	tp, err := s.dash.ThroughputOver(c.UserContext(), "", r.Span, r.Step)
	if err != nil {
		return err
	}
	o.Throughput = tp
	o.CompletedHour, o.FailedHour = 0, 0
	for _, b := range tp {
		o.CompletedHour += b.Outcomes["succeeded"]
		o.FailedHour += b.Outcomes["failed"]
	}
	return nil
}
