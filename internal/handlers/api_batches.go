package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// batchRequest is the body of POST /api/v1/batches: its first members,
// its callbacks, and whether it stays open for more members.
type batchCreateRequest struct {
	Jobs       []json.RawMessage `json:"jobs"`
	OnSuccess  json.RawMessage   `json:"on_success"`
	OnComplete json.RawMessage   `json:"on_complete"`
	OnDeath    json.RawMessage   `json:"on_death"`
	Open       bool              `json:"open"`
}

// batchResponse is a batch with the members a request created.
type batchResponse struct {
	*domain.Batch
	Jobs []*jobs.Job `json:"jobs"`
}

// createBatch handles POST /api/v1/batches: the batch, its members and
// its callbacks in one transaction, or nothing.
func (s *server) createBatch(c *fiber.Ctx) error {
	var req batchCreateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Jobs) == 0 && !req.Open {
		return invalid("jobs", `must hold at least one job (or create the batch with "open": true and add its members later)`)
	}
	members, err := s.batchMembers(c, req.Jobs)
	if err != nil {
		return err
	}
	p := domain.BatchParams{Open: req.Open, Jobs: members, Callbacks: map[string]jobs.EnqueueParams{}}
	raws := []json.RawMessage{req.OnSuccess, req.OnComplete, req.OnDeath} // as domain.CallbackKinds
	for i, kind := range domain.CallbackKinds {
		raw := raws[i]
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		cb, err := s.batchCallback(c, kind, raw)
		if err != nil {
			return err
		}
		p.Callbacks[kind] = cb
	}
	b, out, err := s.batchStore.CreateBatch(c.UserContext(), p)
	if err != nil {
		return err
	}
	s.enqueued(out)
	return c.Status(http.StatusCreated).JSON(batchResponse{Batch: b, Jobs: enqueuedJobs(out)})
}

// addToBatch handles POST /api/v1/batches/{id}/jobs: more members for an
// open batch (409 once it is closed).
func (s *server) addToBatch(c *fiber.Ctx) error {
	id, err := batchID(c)
	if err != nil {
		return err
	}
	var req struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Jobs) == 0 {
		return invalid("jobs", "must hold at least one job")
	}
	members, err := s.batchMembers(c, req.Jobs)
	if err != nil {
		return err
	}
	b, out, err := s.batchStore.AddToBatch(c.UserContext(), id, members)
	if err != nil {
		return notFoundBatch(id, err)
	}
	s.enqueued(out)
	return c.Status(http.StatusCreated).JSON(batchResponse{Batch: b, Jobs: enqueuedJobs(out)})
}

// closeBatch handles POST /api/v1/batches/{id}/close.
func (s *server) closeBatch(c *fiber.Ctx) error {
	id, err := batchID(c)
	if err != nil {
		return err
	}
	b, err := s.batchStore.CloseBatch(c.UserContext(), id)
	if err != nil {
		return notFoundBatch(id, err)
	}
	return c.JSON(b)
}

// getBatch handles GET /api/v1/batches/{id}.
func (s *server) getBatch(c *fiber.Ctx) error {
	id, err := batchID(c)
	if err != nil {
		return err
	}
	b, err := s.batchStore.GetBatch(c.UserContext(), id)
	if err != nil {
		return notFoundBatch(id, err)
	}
	return c.JSON(b)
}

// listBatches handles GET /api/v1/batches: newest first, keyset pages.
func (s *server) listBatches(c *fiber.Ctx) error {
	limit := 50
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return invalid("limit", "must be between 1 and 200")
		}
		limit = n
	}
	page, err := s.batchStore.ListBatches(c.UserContext(), c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	if page.Batches == nil {
		page.Batches = []domain.Batch{}
	}
	return c.JSON(fiber.Map{"batches": page.Batches, "next_cursor": next})
}

// batchMembers validates a batch request's jobs: enqueues as in
// /jobs/batch, without workflow keys, idempotency keys or recurrence.
func (s *server) batchMembers(c *fiber.Ctx, raws []json.RawMessage) ([]jobs.EnqueueParams, error) {
	if len(raws) > MaxBatch {
		return nil, invalid("jobs", fmt.Sprintf("holds %d jobs; the limit is %d per request (add more with POST /api/v1/batches/{id}/jobs)", len(raws), MaxBatch))
	}
	now := s.clock.Now()
	params := make([]jobs.EnqueueParams, len(raws))
	for i, raw := range raws {
		prefix := fmt.Sprintf("jobs[%d]", i)
		var r enqueueRequest
		if err := decodeStrict(raw, &r, prefix); err != nil {
			return nil, err
		}
		switch {
		case r.Key != nil:
			return nil, invalid(join(prefix, "key"), "keys name jobs within a workflow; use POST /api/v1/workflows")
		case r.IdempotencyKey != nil:
			return nil, invalid(join(prefix, "idempotency_key"), "a batch member takes no idempotency key: every job listed becomes a member")
		case r.IntervalSeconds != nil || r.Cron != nil:
			return nil, invalid(join(prefix, "interval_seconds"), "a batch member cannot be recurring")
		}
		p, err := r.params(c.UserContext(), s.types, now, prefix, parseJobRef)
		if err != nil {
			return nil, err
		}
		s.applyDefaults(&p)
		params[i] = p
	}
	return params, nil
}

// batchCallback validates one callback job: an enqueue that runs when the
// batch settles, so without dependencies, schedule or idempotency key.
func (s *server) batchCallback(c *fiber.Ctx, kind string, raw json.RawMessage) (jobs.EnqueueParams, error) {
	var r enqueueRequest
	if err := decodeStrict(raw, &r, kind); err != nil {
		return jobs.EnqueueParams{}, err
	}
	switch {
	case r.Key != nil:
		return jobs.EnqueueParams{}, invalid(join(kind, "key"), "a callback is not a workflow job")
	case r.DependsOn != nil:
		return jobs.EnqueueParams{}, invalid(join(kind, "depends_on"), "a callback runs when the batch settles; it cannot depend on jobs (it reads the members' results as its parents)")
	case r.IdempotencyKey != nil:
		return jobs.EnqueueParams{}, invalid(join(kind, "idempotency_key"), "a callback is enqueued once, when the batch settles; it takes no idempotency key")
	case r.IntervalSeconds != nil || r.Cron != nil:
		return jobs.EnqueueParams{}, invalid(join(kind, "interval_seconds"), "a callback cannot be recurring")
	case r.RunAt != nil || r.DelaySeconds != nil:
		return jobs.EnqueueParams{}, invalid(join(kind, "run_at"), "a callback runs when the batch settles")
	}
	p, err := r.params(c.UserContext(), s.types, s.clock.Now(), kind, nil)
	if err != nil {
		return p, err
	}
	s.applyDefaults(&p)
	return p, nil
}

// batchID reads the batch id in the path.
func batchID(c *fiber.Ctx) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return uuid.Nil, badRequest("invalid_id", "id", "the batch id in the path must be a UUID")
	}
	return id, nil
}

// notFoundBatch names the batch in a not-found error.
func notFoundBatch(id uuid.UUID, err error) error {
	if err == domain.ErrNotFound {
		return fmt.Errorf("no such batch %s: %w", id, domain.ErrNotFound)
	}
	return err
}

// enqueuedJobs lists the jobs of enqueue results.
func enqueuedJobs(out []jobs.Enqueued) []*jobs.Job {
	js := make([]*jobs.Job, len(out))
	for i, e := range out {
		js[i] = e.Job
	}
	return js
}
