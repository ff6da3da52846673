// The job page, its live part and its actions.

package handlers

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

func (s *server) jobDetail(ctx context.Context, id uuid.UUID) (views.JobDetail, error) {
	jd, err := s.loadJob(ctx, id)
	if err != nil {
		return views.JobDetail{}, err
	}
	d := views.JobDetail{Job: jd.Job, Executions: jd.Executions}
	if d.Data, err = s.jobStore.JobData(ctx, jd.Job); err != nil {
		return d, err
	}
	if len(jd.Dependencies.Upstream) > 0 || len(jd.Dependencies.Downstream) > 0 || len(d.Data.Spawned) > 0 || d.Data.SpawnedBy != nil {
		if d.Workflow, err = s.jobStore.WorkflowGraph(ctx, id); err != nil {
			return d, err
		}
	}
	f, err := s.jobStore.ExplainFactsFor(ctx, jd.Job)
	if err != nil {
		return d, err
	}
	e := domain.Explain(f)
	d.Explain = &e
	if d.Log, err = s.jobLogShown(ctx, jd.Job, jd.Executions); err != nil {
		return d, err
	}
	if jd.Job.Durable {
		if d.Steps, err = s.durable.JobSteps(ctx, id); err != nil {
			return d, err
		}
	}
	if b := cmp.Or(d.Data.BatchID, d.Data.CallbackOf); b != nil {
		if d.Batch, err = s.batchStore.GetBatch(ctx, *b); err != nil {
			return d, err
		}
	}
	if s.auditStore != nil {
		d.Audit, err = s.auditStore.ListAudit(ctx, domain.AuditQuery{JobID: &id, Limit: 20})
	}
	return d, err
}

func (s *server) jobPage(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.notFound(c)
	}
	d, err := s.jobDetail(c.UserContext(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return s.notFound(c)
	}
	if err != nil {
		return err
	}
	d.Job, d.Audit = jobForCaller(c, d.Job), auditForCaller(c, d.Audit)
	return render(c, http.StatusOK, views.JobPage(s.chrome(c, "Job "+views.ShortID(id), "jobs", true), d))
}

// jobFromPath reads the job named in the path; a nil job means the
// response (404) has been written or err says what failed.
func (s *server) jobFromPath(c *fiber.Ctx) (*jobs.Job, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return nil, s.notFound(c)
	}
	j, err := s.jobStore.GetJob(c.UserContext(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, s.notFound(c)
	}
	return j, err
}

// jobLogCard re-renders the job page's log card; a running job's card
// asks for it every two seconds.
func (s *server) jobLogCard(c *fiber.Ctx) error {
	j, err := s.jobFromPath(c)
	if j == nil {
		return err
	}
	ctx := c.UserContext()
	execs, err := s.jobStore.ListExecutions(ctx, j)
	if err != nil {
		return err
	}
	lines, err := s.jobLogShown(ctx, j, execs)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobLog(j, lines, execs))
}

// jobLogShown is the start of a job's log as the job page shows it.
func (s *server) jobLogShown(ctx context.Context, j *jobs.Job, execs []domain.Execution) ([]domain.LogEntry, error) {
	page, err := s.jobLog(ctx, j, execs, 0, views.JobLogShown)
	if err != nil {
		return nil, err
	}
	return page.Entries[:min(len(page.Entries), views.JobLogShown)], nil
}

func (s *server) jobLive(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return s.notFound(c)
	}
	d, err := s.jobDetail(c.UserContext(), id)
	if errors.Is(err, domain.ErrNotFound) {
		return redirectHX(c, "/jobs")
	}
	if err != nil {
		return err
	}
	d.Job, d.Audit = jobForCaller(c, d.Job), auditForCaller(c, d.Audit)
	return render(c, http.StatusOK, views.JobLive(d, s.clock.Now()))
}

// jobActionHTML runs an action from the job page and re-renders its live
// part, or explains why the action was refused.
func (s *server) jobActionHTML(action jobAction) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return s.notFound(c)
		}
		ctx := c.UserContext()
		if startOver, err := replaySteps(c, action); err != nil {
			return err
		} else if startOver {
			if err := s.durable.ForgetSteps(ctx, id); err != nil {
				return err
			}
		}
		_, refused, err := s.applyAll(c, action, []uuid.UUID{id})
		if err != nil {
			return err
		}
		if len(refused) > 0 {
			toast(c, "Not possible: "+refused[0], toastBad)
			return c.SendStatus(http.StatusConflict)
		}
		if action == jobPurge {
			return redirectHX(c, "/bin")
		}
		s.logger.InfoContext(ctx, "dashboard action", "component", "dashboard", "action", action, "job_id", id, "actor", dashActor(c))
		toast(c, action.past()+".", toastOK)
		if c.Get("HX-Target") == views.JobRowID(id) { // a list row's own button
			j, err := s.jobStore.GetJob(ctx, id)
			if err != nil {
				return err
			}
			return render(c, http.StatusOK, views.JobRow(j, "jobs", s.clock.Now()))
		}
		d, err := s.jobDetail(ctx, id)
		if err != nil {
			return err
		}
		return render(c, http.StatusOK, views.JobLive(d, s.clock.Now()))
	}
}

func (s *server) notFound(c *fiber.Ctx) error {
	return render(c, http.StatusNotFound, views.ErrorPage(s.chrome(c, "Not found", "", false), "Not found", "There is no such page or job. It may have been purged."))
}

// rawDocument names a job's JSON document a page links to when it is too
// long to show.
type rawDocument string

const (
	rawPayload rawDocument = "payload"
	rawResult  rawDocument = "result"
)

// jobRawJSON serves a job's payload or result as it is stored (the
// payload as the caller may see it), as a download: the page shows a
// bounded part of a long document and links here for the rest.
func (s *server) jobRawJSON(doc rawDocument) fiber.Handler {
	return func(c *fiber.Ctx) error {
		j, err := s.jobFromPath(c)
		if j == nil {
			return err
		}
		body := []byte(j.Result)
		if doc == rawPayload {
			body = payloadForCaller(c, j)
		}
		if len(body) == 0 {
			body = []byte("null")
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="job-`+j.ID.String()+"-"+string(doc)+`.json"`)
		c.Set("X-Content-Type-Options", "nosniff")
		return c.Send(body)
	}
}
