package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// Durable execution over HTTP: steps recorded by pull workers and push
// endpoints (scope work, with the lease token), signals to one job and
// events to every job waiting for them (scope enqueue: whoever may give
// Flint work may tell it what it waits for; a key limited to queues
// reaches only jobs in them).

// stepRequest is the body of POST /api/v1/jobs/{id}/steps.
type stepRequest struct {
	LeaseToken *string         `json:"lease_token"`
	Name       *string         `json:"name"`
	Result     json.RawMessage `json:"result"`
	// StartedAt is when the worker started the step's function (RFC 3339;
	// optional, the request's arrival when absent): the step's start, as
	// the job's page and the step's span show it.
	StartedAt *string `json:"started_at"`
}

// stepResponse is a recorded step as the API shows it.
type stepResponse struct {
	Name       string          `json:"name"`
	Seq        int             `json:"seq"`
	Attempt    int             `json:"attempt"`
	Result     json.RawMessage `json:"result"`
	RecordedAt string          `json:"recorded_at"`
}

// recordStep handles POST /api/v1/jobs/{id}/steps: 201 with the step when
// this call recorded it, 200 with the step recorded before under the
// same name (its result, not this one), 409 lease_lost when the token no
// longer holds the job (nothing written).
func (s *server) recordStep(c *fiber.Ctx) error {
	var req stepRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	lease, err := jobLease(c, req.LeaseToken)
	if err != nil {
		return err
	}
	if req.Name == nil {
		return invalid("name", "is required: the step's name, unique within the job")
	}
	if err := jobs.CheckStepName("name", *req.Name); err != nil {
		return err
	}
	result := req.Result
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if len(result) > jobs.MaxStepResultBytes {
		return invalid("result", fmt.Sprintf("is %d bytes; the limit is %d", len(result), jobs.MaxStepResultBytes))
	}
	if err := jobs.CheckJSON("result", result); err != nil {
		return err
	}
	now := s.clock.Now()
	started := now
	if req.StartedAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.StartedAt)
		if err != nil {
			return invalid("started_at", "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05.123Z")
		}
		started = t
	}
	h, err := s.leaseHolder(c, lease)
	if err != nil {
		return err
	}
	started = stepStart(started, h.StartedAt, now)
	rec, fresh, err := s.durable.RecordStep(c.UserContext(), lease, jobs.StepRecord{Name: *req.Name, Result: result, StartedAt: started})
	if errors.Is(err, domain.ErrLeaseLost) {
		return errLeaseLost
	}
	if err != nil {
		return err
	}
	traceStep(c.UserContext(), h, rec, fresh, started, s.clock.Now())
	status := http.StatusOK
	if fresh {
		status = http.StatusCreated
	}
	return c.Status(status).JSON(stepResponse{Name: rec.Name, Seq: rec.Seq, Attempt: rec.Attempt, Result: rec.Result,
		RecordedAt: rec.RecordedAt.UTC().Format("2006-01-02T15:04:05.000000Z07:00")})
}

// signalRequest is the body of POST /api/v1/jobs/{id}/signals/{name}.
type signalRequest struct {
	ID   *string         `json:"id"`
	Body json.RawMessage `json:"body"`
}

// checkSignalBody validates a signal's or an event's body for field.
func checkSignalBody(field string, body json.RawMessage) error {
	if len(body) == 0 {
		return nil
	}
	if len(body) > domain.MaxSignalBodyBytes {
		return invalid(field, fmt.Sprintf("is %d bytes; the limit is %d", len(body), domain.MaxSignalBodyBytes))
	}
	return jobs.CheckJSON(field, body)
}

// sendSignal handles POST /api/v1/jobs/{id}/signals/{name}: 202 whether
// the signal resumed the job or is kept for a later wait (resumed says
// which; duplicate says the same id was sent before and nothing changed),
// 404 for no such job, 409 for a job that has finished.
func (s *server) sendSignal(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return badRequest("invalid_id", "id", "the job id in the path must be a UUID")
	}
	name := c.Params("name")
	if err := jobs.CheckSignalName("name", name); err != nil {
		return err
	}
	var req signalRequest
	if len(c.Body()) > 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	dedupe := ""
	if req.ID != nil {
		if err := jobs.CheckStepName("id", *req.ID); err != nil {
			return err
		}
		dedupe = *req.ID
	}
	if err := checkSignalBody("body", req.Body); err != nil {
		return err
	}
	j, err := s.jobStore.GetJob(c.UserContext(), id)
	if err != nil {
		return err
	}
	if err := queueAllowed(c, j.Queue); err != nil {
		return err
	}
	if j.Status.Terminal() {
		return &domain.TransitionError{Op: "signal", From: j.Status, Reason: "the job has finished; a signal reaches only jobs that have not"}
	}
	fresh, resumed, err := s.durable.SendSignal(c.UserContext(), id, name, dedupe, req.Body)
	if err != nil {
		return err
	}
	if resumed {
		s.wakeQueue(j.Queue)
	}
	if fresh {
		s.audit(c, "job_signal", map[string]any{"name": name, "resumed": resumed}, id)
	}
	return c.Status(http.StatusAccepted).JSON(fiber.Map{"job_id": id, "name": name, "resumed": resumed, "duplicate": !fresh})
}

// queueAllowed refuses a key limited to queues for a job outside them.
func queueAllowed(c *fiber.Ctx, queue string) error {
	p, _ := principalOf(c)
	if p.queues != nil && !slices.Contains(p.queues, queue) {
		return &apiError{Status: http.StatusForbidden, Code: "forbidden",
			Message: fmt.Sprintf("this key may reach only jobs of the queues %v; the job is in %q", p.queues, queue)}
	}
	return nil
}

// eventRequest is the body of POST /api/v1/events.
type eventRequest struct {
	Name *string         `json:"name"`
	Body json.RawMessage `json:"body"`
}

// sendEvent handles POST /api/v1/events: the event resumes every job
// waiting for it now (those of the key's queues, for a key limited to
// queues) and is not kept; 202 with how many it resumed.
func (s *server) sendEvent(c *fiber.Ctx) error {
	var req eventRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name == nil {
		return invalid("name", "is required: the event's name, as jobs wait for it")
	}
	if err := jobs.CheckSignalName("name", *req.Name); err != nil {
		return err
	}
	if err := checkSignalBody("body", req.Body); err != nil {
		return err
	}
	p, _ := principalOf(c)
	n, err := s.durable.SendEvent(c.UserContext(), *req.Name, req.Body, p.queues)
	if err != nil {
		return err
	}
	return c.Status(http.StatusAccepted).JSON(fiber.Map{"name": *req.Name, "delivered": n})
}

// signalHTML handles POST /jobs/{id}/signal, the job page's signal form
// (operators): it sends the signal as the API would, audited, and
// re-renders the page's live part; what the form gets wrong is a toast.
func (s *server) signalHTML(c *fiber.Ctx) error {
	j, err := s.jobFromPath(c)
	if j == nil {
		return err
	}
	name := strings.TrimSpace(c.FormValue("name"))
	body := json.RawMessage(strings.TrimSpace(c.FormValue("body")))
	if len(body) == 0 {
		body = json.RawMessage("null")
	}
	err = jobs.CheckSignalName("name", name)
	if err == nil {
		err = checkSignalBody("body", body)
	}
	if err == nil && j.Status.Terminal() {
		err = &domain.TransitionError{Op: "signal", From: j.Status, Reason: "the job has finished"}
	}
	var fresh, resumed bool
	if err == nil {
		fresh, resumed, err = s.durable.SendSignal(c.UserContext(), j.ID, name, "", body)
	}
	var ve *jobs.ValidationError
	var ae *apiError
	if errors.As(err, &ve) || errors.As(err, &ae) || errors.Is(err, domain.ErrInvalidTransition) {
		toast(c, "Not sent: "+err.Error()+".", toastBad)
		return c.SendStatus(http.StatusUnprocessableEntity)
	}
	if err != nil {
		return err
	}
	if resumed {
		s.wakeQueue(j.Queue)
	}
	if fresh {
		s.audit(c, "job_signal", map[string]any{"name": name, "resumed": resumed}, j.ID)
	}
	msg := "Signal " + name + " kept for the job's wait."
	if resumed {
		msg = "Signal " + name + " sent: the job runs again."
	}
	toast(c, msg, toastOK)
	d, err := s.jobDetail(c.UserContext(), j.ID)
	if err != nil {
		return err
	}
	d.Job, d.Audit = jobForCaller(c, d.Job), auditForCaller(c, d.Audit)
	return render(c, http.StatusOK, views.JobLive(d, s.clock.Now()))
}

// replaySteps reads ?steps= of a retry: "keep" (the default: a replayed
// job returns its recorded steps without running them) or "start_over"
// (its steps and signals are dropped first, and it runs from the top).
func replaySteps(c *fiber.Ctx, action jobAction) (startOver bool, err error) {
	v := c.Query("steps")
	if v == "" {
		v = c.FormValue("steps")
	}
	switch v {
	case "", "keep":
		return false, nil
	case "start_over":
		if action != jobRetry {
			return false, invalid("steps", "applies to retries (replays from the dead-letter queue) only")
		}
		return true, nil
	}
	return false, invalid("steps", fmt.Sprintf("unknown value %q: use keep (the default) or start_over", v))
}
