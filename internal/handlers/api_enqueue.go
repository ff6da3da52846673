package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/bufpool"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// MaxBatch is the most jobs one batch request may enqueue.
const MaxBatch = 10000

// priorityValue accepts 1, 2, 3 or "high", "medium", "low".
type priorityValue int

// UnmarshalJSON reads a priority given as a number or a name; anything
// else is a *fieldError naming the priority field.
func (p *priorityValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return &fieldError{"priority", "must be 1, 2, 3, \"high\", \"medium\" or \"low\""}
		}
		n, ok := domain.PriorityByName(s)
		if !ok {
			return &fieldError{"priority", fmt.Sprintf("unknown priority %q: use 1, 2, 3, \"high\", \"medium\" or \"low\"", s)}
		}
		*p = priorityValue(n)
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n < jobs.PriorityHigh || n > jobs.PriorityLow {
		return &fieldError{"priority", "must be 1 (high), 2 (medium), 3 (low) or the name"}
	}
	*p = priorityValue(n)
	return nil
}

// enqueueRequest is the body of POST /api/v1/jobs and one entry of a batch.
type enqueueRequest struct {
	Type            string          `json:"type"`
	Payload         json.RawMessage `json:"payload"`
	Priority        *priorityValue  `json:"priority"`
	Queue           string          `json:"queue"`
	RunAt           *string         `json:"run_at"`
	DelaySeconds    *float64        `json:"delay_seconds"`
	MaxRetries      *int            `json:"max_retries"`
	TimeoutSeconds  *int            `json:"timeout_seconds"`
	IntervalSeconds *int64          `json:"interval_seconds"`
	Cron            *string         `json:"cron"`
	Timezone        *string         `json:"timezone"`
	DependsOn       []string        `json:"depends_on"`
	IdempotencyKey  *string         `json:"idempotency_key"`
	ConcurrencyKey  *string         `json:"concurrency_key"`
	// Key names the job within a workflow submission.
	Key *string `json:"key"`
}

// params validates the request into enqueue parameters; prefix names the
// request in error fields ("" or "jobs[3]").
//
// resolve turns a depends_on entry into a job id: a UUID for plain enqueues,
// a key or a UUID in workflows.
func (r *enqueueRequest) params(ctx context.Context, types typeCatalog, now time.Time, prefix string, resolve func(string) (uuid.UUID, error)) (jobs.EnqueueParams, error) {
	p := jobs.EnqueueParams{Type: r.Type, Payload: r.Payload, Queue: r.Queue}
	if r.Priority != nil {
		p.Priority = int(*r.Priority)
	}
	if r.RunAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *r.RunAt)
		if err != nil {
			return p, invalid(join(prefix, "run_at"), "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z")
		}
		p.RunAt = &t
	}
	if r.DelaySeconds != nil {
		d := *r.DelaySeconds
		if math.IsNaN(d) || d < 0 || d > jobs.MaxDelay.Seconds() {
			return p, invalid(join(prefix, "delay_seconds"), fmt.Sprintf("must be between 0 and %d", int64(jobs.MaxDelay.Seconds())))
		}
		p.Delay = time.Duration(d * float64(time.Second))
	}
	p.MaxRetries = r.MaxRetries
	if r.TimeoutSeconds != nil {
		if *r.TimeoutSeconds < 1 {
			return p, invalid(join(prefix, "timeout_seconds"), fmt.Sprintf("must be between 1 and %d (or omitted for none)", jobs.MaxTimeoutSeconds))
		}
		p.TimeoutSeconds = *r.TimeoutSeconds
	}
	if r.IdempotencyKey != nil {
		if *r.IdempotencyKey == "" {
			return p, invalid(join(prefix, "idempotency_key"), "must not be empty (omit it instead)")
		}
		p.IdempotencyKey = *r.IdempotencyKey
	}
	if r.ConcurrencyKey != nil {
		if *r.ConcurrencyKey == "" {
			return p, invalid(join(prefix, "concurrency_key"), "must not be empty (omit it instead)")
		}
		p.ConcurrencyKey = *r.ConcurrencyKey
	}
	if r.IntervalSeconds != nil {
		if *r.IntervalSeconds < 1 || *r.IntervalSeconds > jobs.MaxIntervalSeconds {
			return p, invalid(join(prefix, "interval_seconds"), fmt.Sprintf("must be between 1 and %d", jobs.MaxIntervalSeconds))
		}
		p.IntervalSeconds = *r.IntervalSeconds
	}
	if r.Cron != nil {
		if *r.Cron == "" {
			return p, invalid(join(prefix, "cron"), "must not be empty (omit it instead)")
		}
		p.Cron = *r.Cron
	}
	if r.Timezone != nil {
		p.Timezone = *r.Timezone
	}
	if r.DependsOn != nil && resolve != nil {
		p.DependsOn = make([]uuid.UUID, len(r.DependsOn))
		for i, ref := range r.DependsOn {
			id, err := resolve(ref)
			if err != nil {
				return p, invalid(join(prefix, fmt.Sprintf("depends_on[%d]", i)), err.Error())
			}
			p.DependsOn[i] = id
		}
	}
	types.Prepare(ctx, p.Type, p.Queue)
	if err := p.Validate(types, now); err != nil {
		if ve, ok := err.(*jobs.ValidationError); ok {
			return p, invalid(join(prefix, ve.Field), ve.Message)
		}
		return p, err
	}
	return p, nil
}

// enqueue handles POST /api/v1/jobs.
func (s *server) enqueue(c *fiber.Ctx) error {
	var req enqueueRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Key != nil {
		return invalid("key", "keys name jobs within a workflow; use POST /api/v1/workflows")
	}
	p, err := req.params(c.UserContext(), s.types, s.clock.Now(), "", parseJobRef)
	if err != nil {
		return err
	}
	s.applyDefaults(&p)
	res, err := s.jobStore.Enqueue(c.UserContext(), p)
	if err != nil {
		return err
	}
	s.enqueued(res)
	status := http.StatusCreated
	if !res[0].Inserted {
		if !mayRead(c) {
			return c.Status(http.StatusOK).JSON(refOf(res[0].Job))
		}
		status = http.StatusOK
	}
	// Written directly (as a batch's jobs are): encoding/json's reflection
	// was a twentieth of the API's CPU per single enqueue.
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Status(status).Send(res[0].Job.AppendJSON(make([]byte, 0, 512)))
}

// jobRef is all that a caller without the read scope learns of an existing
// job that its idempotency key matched: that the key is taken, by which
// job, and where that job stands. Not its payload, result or errors: an
// enqueue-only key must not read other callers' jobs by guessing keys.
type jobRef struct {
	ID        uuid.UUID  `json:"id"`
	Status    jobs.State `json:"status"`
	Type      string     `json:"type"`
	Queue     string     `json:"queue"`
	CreatedAt time.Time  `json:"created_at"`
}

func refOf(j *jobs.Job) jobRef {
	return jobRef{ID: j.ID, Status: j.Status, Type: j.Type, Queue: j.Queue, CreatedAt: j.CreatedAt}
}

// mayRead reports whether the caller may read jobs, and so be shown an
// existing job in full.
func mayRead(c *fiber.Ctx) bool {
	p, ok := principalOf(c)
	return ok && auth.Grants(p.scopes, auth.ScopeRead)
}

// batchRequest is the body of POST /api/v1/jobs/batch.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// enqueueBatch handles POST /api/v1/jobs/batch: all jobs or none.
func (s *server) enqueueBatch(c *fiber.Ctx) error {
	// One pass over the body decodes a well-formed batch. Only when that
	// fails is it decoded job by job, to name the job at fault.
	var fast struct {
		Jobs []enqueueRequest `json:"jobs"`
	}
	if err := decodeJSON(c, &fast); err != nil {
		var req batchRequest
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
		fast.Jobs = make([]enqueueRequest, len(req.Jobs))
		for i, raw := range req.Jobs {
			if err := decodeStrict(raw, &fast.Jobs[i], fmt.Sprintf("jobs[%d]", i)); err != nil {
				return err
			}
		}
	}
	reqs := fast.Jobs
	if len(reqs) == 0 {
		return invalid("jobs", "must hold at least one job")
	}
	if len(reqs) > MaxBatch {
		return invalid("jobs", fmt.Sprintf("holds %d jobs; the limit is %d per batch", len(reqs), MaxBatch))
	}
	now := s.clock.Now()
	params := make([]jobs.EnqueueParams, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		prefix := fmt.Sprintf("jobs[%d]", i)
		if r.Key != nil {
			return invalid(join(prefix, "key"), "keys name jobs within a workflow; use POST /api/v1/workflows")
		}
		p, err := r.params(c.UserContext(), s.types, now, prefix, parseJobRef)
		if err != nil {
			return err
		}
		s.applyDefaults(&p)
		params[i] = p
	}
	res, err := s.jobStore.Enqueue(c.UserContext(), params...)
	if err != nil {
		return err
	}
	s.enqueued(res)
	// Up to MaxBatch jobs: written directly (jobs.Job.AppendJSON), which
	// costs a fraction of encoding/json's reflection and compaction.
	// A job that was there already (its idempotency key matched) is shown
	// in full only to a caller that may read jobs.
	full := mayRead(c)
	buf := batchBodies.Get()
	body := append((*buf)[:0], `{"jobs":[`...)
	for i, r := range res {
		if i > 0 {
			body = append(body, ',')
		}
		if r.Inserted || full {
			body = r.Job.AppendJSON(body)
			continue
		}
		ref, err := json.Marshal(refOf(r.Job))
		if err != nil {
			return err
		}
		body = append(body, ref...)
	}
	body = append(body, "]}"...)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Status(http.StatusCreated).Response().SetBody(body) // a copy: the buffer can go back
	*buf = body
	batchBodies.Put(buf)
	return nil
}

// batchBodies holds the buffers batch responses are written in (about 350
// bytes a job, so a third of a megabyte for a full batch of small jobs):
// reused rather than allocated and collected for every request.
var batchBodies bufpool.Pool

// parseJobRef reads a depends_on entry of a plain enqueue: a job id.
func parseJobRef(ref string) (uuid.UUID, error) {
	id, err := uuid.Parse(ref)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%q is not a job id (UUID)", ref)
	}
	return id, nil
}

// applyDefaults fills what the runtime settings decide.
func (s *server) applyDefaults(p *jobs.EnqueueParams) {
	if p.MaxRetries == nil && s.settings != nil {
		n := s.settings.Get().DefaultMaxRetries
		p.MaxRetries = &n
	}
}

// enqueued wakes this process's workers for queues that gained work.
func (s *server) enqueued(res []jobs.Enqueued) {
	inserted := make([]*jobs.Job, 0, len(res))
	for _, r := range res {
		if r.Inserted {
			inserted = append(inserted, r.Job)
		}
	}
	s.wakeFor(inserted...)
}
