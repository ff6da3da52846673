package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// listResponse is a page of jobs.
type listResponse struct {
	Jobs       []*jobs.Job `json:"jobs"`
	NextCursor *string     `json:"next_cursor"`
}

// pageResponse is p as the caller may see it (payloadForCaller).
func pageResponse(c *fiber.Ctx, p domain.Page) listResponse {
	r := listResponse{Jobs: make([]*jobs.Job, len(p.Jobs))}
	for i, j := range p.Jobs {
		r.Jobs[i] = jobForCaller(c, j)
	}
	if p.NextCursor != "" {
		r.NextCursor = &p.NextCursor
	}
	return r
}

// listParams reads the listing query parameters shared by /jobs, /dlq and
// /bin.
func listParams(c *fiber.Ctx) (domain.ListParams, error) {
	p := domain.ListParams{Type: c.Query("type"), Queue: c.Query("queue"), Q: c.Query("q"), Cursor: c.Query("cursor")}
	if v := c.Query("status"); v != "" {
		for _, s := range strings.Split(v, ",") {
			st := jobs.State(strings.TrimSpace(s))
			if !st.Valid() {
				return p, invalid("status", fmt.Sprintf("unknown status %q; use one or more of %s", s, stateList()))
			}
			p.Statuses = append(p.Statuses, st)
		}
	}
	if v := c.Query("batch_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return p, invalid("batch_id", "must be a batch id (UUID)")
		}
		p.BatchID = &id
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > domain.MaxListLimit {
			return p, invalid("limit", fmt.Sprintf("must be a whole number between 1 and %d", domain.MaxListLimit))
		}
		p.Limit = n
	}
	return p, nil
}

func stateList() string {
	parts := make([]string, len(jobs.States))
	for i, s := range jobs.States {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// apiJobOrders are the values of GET /api/v1/jobs?sort=: the orders the
// Jobs page offers (views.ListOrders), its default named "created".
func apiJobOrders() []string {
	var out []string
	for _, o := range views.ListOrders("jobs") {
		out = append(out, cmp.Or(o.Value, "created"))
	}
	return out
}

// listOrder reads GET /api/v1/jobs?sort= into p: by creation (default),
// start or finish time, latest first or, with the _oldest forms (and
// "oldest" for creation), earliest first.
func listOrder(c *fiber.Ctx, p *domain.ListParams) error {
	v := c.Query("sort")
	if v == "created" {
		v = ""
	}
	o, ok := views.OrderOf("jobs", v)
	if !ok {
		return invalid("sort", fmt.Sprintf("unknown order %q; use one of %s", v, strings.Join(apiJobOrders(), ", ")))
	}
	p.By, p.Oldest = o.By, o.Oldest
	return nil
}

// listJobs handles GET /api/v1/jobs.
func (s *server) listJobs(c *fiber.Ctx) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	if err := listOrder(c, &p); err != nil {
		return err
	}
	page, err := s.jobStore.ListJobs(c.UserContext(), p)
	if err != nil {
		return err
	}
	return c.JSON(pageResponse(c, page))
}

// jobDetail is a job with its executions and dependencies.
type jobDetail struct {
	*jobs.Job
	Executions   []domain.Execution  `json:"executions"`
	Dependencies domain.Dependencies `json:"dependencies"`
}

// jobID reads the {id} path parameter.
func jobID(c *fiber.Ctx) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return uuid.Nil, badRequest("invalid_id", "id", "the job id in the path must be a UUID")
	}
	return id, nil
}

// getJob handles GET /api/v1/jobs/{id}.
func (s *server) getJob(c *fiber.Ctx) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	d, err := s.loadJob(c.UserContext(), id)
	if err != nil {
		return err
	}
	d.Job = jobForCaller(c, d.Job)
	return c.JSON(d)
}

// replayRequest is the body of POST /api/v1/jobs/{id}/replay.
type replayRequest struct {
	Payload json.RawMessage `json:"payload"`
}

// replayJob handles POST /api/v1/jobs/{id}/replay: a dead-letter job gets a
// new payload and runs again; the audit trail keeps the old one.
func (s *server) replayJob(c *fiber.Ctx) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	var req replayRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if p := bytes.TrimSpace(req.Payload); len(p) == 0 || string(p) == "null" {
		return invalid("payload", "is required: the JSON object the job should run with")
	}
	j, old, err := s.editAndReplay(c, id, req.Payload)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"job": jobForCaller(c, j), "payload_before": payloadForCaller(c, &jobs.Job{Type: j.Type, Payload: old})})
}

// editAndReplay validates payload for the job's type and replays the job
// with it.
func (s *server) editAndReplay(c *fiber.Ctx, id uuid.UUID, payload json.RawMessage) (*jobs.Job, json.RawMessage, error) {
	ctx := c.UserContext()
	cur, err := s.jobStore.GetJob(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if cur.Type == jobs.TypeHTTPRequest && !seesSecrets(c) {
		payload = restoreRedacted(cur.Payload, payload)
	}
	clean, err := s.registry.CheckPayload(cur.Type, payload)
	if err != nil {
		return nil, nil, err
	}
	old, j, err := s.jobActionStore.EditAndReplay(ctx, id, clean, auditActor(c))
	return j, old, err
}

// explainJob handles GET /api/v1/jobs/{id}/explain: why the job is where
// it is, from the database's facts.
func (s *server) explainJob(c *fiber.Ctx) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	f, err := s.jobStore.ExplainFacts(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(domain.Explain(f))
}

// loadJob reads a job with its runs and dependencies, for the API and the
// job page.
func (s *server) loadJob(ctx context.Context, id uuid.UUID) (jobDetail, error) {
	j, err := s.jobStore.GetJob(ctx, id)
	if err != nil {
		return jobDetail{}, err
	}
	ex, err := s.jobStore.ListExecutions(ctx, j)
	if err != nil {
		return jobDetail{}, err
	}
	deps, err := s.jobStore.Dependencies(ctx, id)
	if err != nil {
		return jobDetail{}, err
	}
	return jobDetail{Job: j, Executions: ex, Dependencies: deps}, nil
}

// jobActionAPI handles POST /api/v1/jobs/{id}/cancel, /retry and /restore.
func (s *server) jobActionAPI(action jobAction) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := jobID(c)
		if err != nil {
			return err
		}
		startOver, err := replaySteps(c, action)
		if err != nil {
			return err
		}
		if startOver {
			if err := s.durable.ForgetSteps(c.UserContext(), id); err != nil {
				return err
			}
		}
		j, err := s.jobOp(c.UserContext(), action, id)
		if err != nil {
			return err
		}
		var details any
		if startOver {
			details = map[string]string{"steps": "start_over"}
		}
		s.audit(c, string(action), details, id)
		status := http.StatusOK
		if j.Status.Leased() && j.CancelRequested {
			status = http.StatusAccepted // the worker stops it at its next checkpoint
		}
		return c.Status(status).JSON(j)
	}
}

// deleteJob handles DELETE /api/v1/jobs/{id}: to the bin, or with
// ?purge=true out of the bin for good.
func (s *server) deleteJob(c *fiber.Ctx) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	switch c.Query("purge") {
	case "", "false", "0":
		j, err := s.jobActionStore.DeleteJob(c.UserContext(), id)
		if err != nil {
			return err
		}
		s.audit(c, string(jobDelete), nil, id)
		return c.JSON(j)
	case "true", "1":
		if err := s.jobActionStore.PurgeJob(c.UserContext(), id); err != nil {
			return err
		}
		s.audit(c, string(jobPurge), nil, id)
		return c.JSON(fiber.Map{"id": id, "purged": true})
	default:
		return invalid("purge", "must be true or false")
	}
}
