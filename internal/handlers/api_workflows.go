package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// workflowRequest is the body of POST /api/v1/workflows: jobs with
// client-side keys whose depends_on name other keys (or existing job ids).
type workflowRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// workflowJob is one job of the response, carrying its key.
type workflowJob struct {
	Key string `json:"key"`
	*jobs.Job
}

// workflowRef is a job of the response that existed already (its
// idempotency key matched), for a caller that may not read jobs.
type workflowRef struct {
	Key string `json:"key"`
	jobRef
}

// enqueueWorkflow handles POST /api/v1/workflows: the whole graph in one
// transaction, refused with the cycle named if it has one.
func (s *server) enqueueWorkflow(c *fiber.Ctx) error {
	var req workflowRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Jobs) == 0 {
		return invalid("jobs", "must hold at least one job")
	}
	if len(req.Jobs) > domain.MaxWorkflowJobs {
		return invalid("jobs", fmt.Sprintf("holds %d jobs; the limit is %d per workflow", len(req.Jobs), domain.MaxWorkflowJobs))
	}
	reqs := make([]enqueueRequest, len(req.Jobs))
	nodes := make([]domain.WorkflowNode, len(req.Jobs))
	for i, raw := range req.Jobs {
		prefix := fmt.Sprintf("jobs[%d]", i)
		if err := decodeStrict(raw, &reqs[i], prefix); err != nil {
			return err
		}
		if reqs[i].Key == nil {
			return invalid(join(prefix, "key"), "is required: each job of a workflow needs a key the others can refer to")
		}
		nodes[i] = domain.WorkflowNode{Key: *reqs[i].Key, DependsOn: reqs[i].DependsOn}
	}
	isJobID := func(ref string) bool { _, err := uuid.Parse(ref); return err == nil }
	if _, err := domain.CheckWorkflow(nodes, isJobID); err != nil {
		if ce, ok := err.(*domain.CycleError); ok {
			return invalid("jobs", ce.Error())
		}
		return err
	}
	ids := make(map[string]uuid.UUID, len(nodes))
	for _, n := range nodes {
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		ids[n.Key] = id
	}
	resolve := func(ref string) (uuid.UUID, error) {
		if id, ok := ids[ref]; ok {
			return id, nil
		}
		return parseJobRef(ref)
	}
	workflow, err := uuid.NewV7()
	if err != nil {
		return err
	}
	now := s.clock.Now()
	params := make([]jobs.EnqueueParams, len(reqs))
	for i := range reqs {
		p, err := reqs[i].params(c.UserContext(), s.types, now, fmt.Sprintf("jobs[%d]", i), resolve)
		if err != nil {
			return err
		}
		if p.Recurring() {
			return invalid(fmt.Sprintf("jobs[%d].interval_seconds", i), "a workflow job cannot be recurring")
		}
		p.ID = ids[*reqs[i].Key]
		p.StepKey, p.WorkflowID = *reqs[i].Key, workflow
		s.applyDefaults(&p)
		params[i] = p
	}
	res, err := s.jobStore.Enqueue(c.UserContext(), params...)
	if err != nil {
		return err
	}
	s.enqueued(res)
	full := mayRead(c)
	out := make([]any, len(res))
	for i, r := range res {
		if r.Inserted || full {
			out[i] = workflowJob{Key: *reqs[i].Key, Job: r.Job}
		} else {
			out[i] = workflowRef{Key: *reqs[i].Key, jobRef: refOf(r.Job)}
		}
	}
	return c.Status(http.StatusCreated).JSON(fiber.Map{"jobs": out})
}
