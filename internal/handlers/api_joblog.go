package handlers

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Job log pages: at most maxJobLogPage stored lines per response.
const (
	defaultJobLogPage = 500
	maxJobLogPage     = 5000
)

// jobLogPage is a job's log: Flint's lifecycle lines (on the first page)
// merged in time order with the lines its handler logged after a sequence
// number.
type jobLogPage struct {
	Entries []domain.LogEntry `json:"entries"`
	// NextAfter is the after= of the next page; it equals the request's
	// when no stored line is newer.
	NextAfter int64 `json:"next_after"`
}

// jobLogs handles GET /api/v1/jobs/{id}/logs?after=&limit=.
func (s *server) jobLogs(c *fiber.Ctx) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	after, limit := int64(0), defaultJobLogPage
	if v := c.Query("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return invalid("after", "must be the next_after of a previous page (a whole number ≥ 0)")
		}
	}
	if v := c.Query("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxJobLogPage {
			return invalid("limit", "must be between 1 and "+strconv.Itoa(maxJobLogPage))
		}
	}
	page, err := s.loadJobLog(c.UserContext(), id, after, limit)
	if err != nil {
		return err
	}
	return c.JSON(page)
}

// loadJobLog reads one page of a job's log.
func (s *server) loadJobLog(ctx context.Context, id uuid.UUID, after int64, limit int) (jobLogPage, error) {
	j, err := s.jobStore.GetJob(ctx, id)
	if err != nil {
		return jobLogPage{}, err
	}
	var execs []domain.Execution
	if after == 0 {
		if execs, err = s.jobStore.ListExecutions(ctx, j); err != nil {
			return jobLogPage{}, err
		}
	}
	return s.jobLog(ctx, j, execs, after, limit)
}

// jobLog merges, on the first page (after 0), the lifecycle lines of j's
// runs execs and of its row with up to limit lines its handler logged
// after seq after.
func (s *server) jobLog(ctx context.Context, j *jobs.Job, execs []domain.Execution, after int64, limit int) (jobLogPage, error) {
	stored, err := s.jobStore.JobLogs(ctx, j.ID, after, limit)
	if err != nil {
		return jobLogPage{}, err
	}
	page := jobLogPage{NextAfter: after}
	if len(stored) > 0 {
		page.NextAfter = stored[len(stored)-1].Seq
	}
	var lifecycle []domain.LogEntry
	if after == 0 {
		var cancel *domain.AuditEntry
		if j.Status == jobs.StateCancelled {
			if cancel, err = s.jobStore.CancelAudit(ctx, j.ID); err != nil {
				return jobLogPage{}, err
			}
		}
		lifecycle = domain.LifecycleLines(j, execs, cancel)
	}
	page.Entries = domain.MergeLog(lifecycle, stored)
	return page, nil
}
