// The overview page and its live part.

package handlers

import (
	"context"
	"net/http"

	"github.com/gofiber/fiber/v2"

	"flint/jobs"
	"flint/views"
)

// overviewData is what the overview shows, shared by every open overview
// for a second (they all refresh on the same event).
func (s *server) overviewData(ctx context.Context) (views.Overview, error) {
	return s.overview.get(ctx, s.loadOverview)
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
	o.RecentFailures, err = s.dash.RecentFailures(ctx, 8)
	return o, err
}

func (s *server) overviewPage(c *fiber.Ctx) error {
	o, err := s.overviewData(c.UserContext())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewPage(s.chrome(c, "Overview", "overview", true), o))
}

func (s *server) overviewLive(c *fiber.Ctx) error {
	o, err := s.overviewData(c.UserContext())
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.OverviewLive(o, s.clock.Now()))
}
