// Queues as things an operator manages: the API and the Queues page.

package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"flint/jobs"
	"flint/views"
)

// queueName reads the :name parameter, refusing what cannot name a queue.
func queueName(c *fiber.Ctx) (string, error) {
	name := c.Params("name")
	if !jobs.ValidQueue(name) {
		return "", invalid("name", fmt.Sprintf("must be 1-%d letters, digits or _ . : -", jobs.MaxQueueLen))
	}
	return name, nil
}

// listQueues handles GET /api/v1/queues: every queue that has jobs or
// settings.
func (s *server) listQueues(c *fiber.Ctx) error {
	qs, err := s.store.ListQueues(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"queues": qs})
}

// getQueue handles GET /api/v1/queues/:name.
func (s *server) getQueue(c *fiber.Ctx) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	q, err := s.store.GetQueue(c.UserContext(), name)
	if err != nil {
		return err
	}
	return c.JSON(q)
}

// queueAfter reads a queue after a change; a queue with neither jobs nor
// settings cannot be missing then, but a paused empty queue has settings.
func (s *server) queueAfter(c *fiber.Ctx, st jobs.QueueSettings) (jobs.QueueInfo, error) {
	q, err := s.store.GetQueue(c.UserContext(), st.Name)
	if err != nil {
		return jobs.QueueInfo{QueueSettings: st}, err
	}
	return q, nil
}

// pauseQueue handles POST /api/v1/queues/:name/pause and /resume. Pausing
// a queue that has no jobs yet is allowed: it holds what arrives.
func (s *server) pauseQueue(paused bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		name, err := queueName(c)
		if err != nil {
			return err
		}
		st, err := s.setPaused(c, name, paused)
		if err != nil {
			return err
		}
		q, err := s.queueAfter(c, st)
		if err != nil {
			return err
		}
		return c.JSON(q)
	}
}

func (s *server) setPaused(c *fiber.Ctx, name string, paused bool) (jobs.QueueSettings, error) {
	actor := auditActor(c).Actor
	st, err := s.store.UpdateQueue(c.UserContext(), name, actor, func(q jobs.QueueSettings) jobs.QueueSettings {
		q.Paused = paused
		return q
	})
	if err != nil {
		return st, err
	}
	action := "queue_pause"
	if !paused {
		action = "queue_resume"
		if s.wake != nil {
			s.wake(name)
		}
	}
	s.audit(c, action, map[string]any{"queue": name})
	return st, nil
}

// patchQueue handles PATCH /api/v1/queues/:name: concurrency, rate_limit
// and per_key_concurrency, each null to remove the limit.
func (s *server) patchQueue(c *fiber.Ctx) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	patch, err := jobs.ParseQueuePatch(c.Body())
	if err != nil {
		return err
	}
	st, err := s.applyQueuePatch(c, name, patch)
	if err != nil {
		return err
	}
	q, err := s.queueAfter(c, st)
	if err != nil {
		return err
	}
	return c.JSON(q)
}

func (s *server) applyQueuePatch(c *fiber.Ctx, name string, patch jobs.QueuePatch) (jobs.QueueSettings, error) {
	st, err := s.store.UpdateQueue(c.UserContext(), name, auditActor(c).Actor, patch.Apply)
	if err != nil {
		return st, err
	}
	if s.wake != nil {
		s.wake(name) // a raised limit may let waiting jobs start
	}
	details := patch.Changes()
	details["queue"] = name
	s.audit(c, "queue_limits", details)
	return st, nil
}

// The Queues page.

func (s *server) queuesPage(c *fiber.Ctx) error {
	qs, err := s.store.ListQueues(c.UserContext())
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "queues-live" {
		return render(c, http.StatusOK, views.QueuesTable(qs, nil))
	}
	return render(c, http.StatusOK, views.QueuesPage(s.chrome(c, "Queues", "queues", true), qs))
}

// queuePauseHTML pauses or resumes a queue from the Queues page.
func (s *server) queuePauseHTML(paused bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		name := c.Params("name")
		if !jobs.ValidQueue(name) {
			return s.notFound(c)
		}
		if _, err := s.setPaused(c, name, paused); err != nil {
			return err
		}
		msg := "Queue " + name + " paused: no process starts its jobs until it is resumed."
		if !paused {
			msg = "Queue " + name + " resumed."
		}
		toast(c, msg, toastOK)
		return s.queuesTable(c, nil)
	}
}

func (s *server) queuesTable(c *fiber.Ctx, form *views.QueueForm) error {
	qs, err := s.store.ListQueues(c.UserContext())
	if err != nil {
		return err
	}
	status := http.StatusOK
	if form != nil && form.Error != "" {
		status = http.StatusUnprocessableEntity
	}
	return render(c, status, views.QueuesTable(qs, form))
}

// queueLimitsHTML saves the limits form of one queue. Empty fields mean
// no limit; a refusal answers 422 with the form as typed and what to fix.
func (s *server) queueLimitsHTML(c *fiber.Ctx) error {
	name := c.Params("name")
	if !jobs.ValidQueue(name) {
		return s.notFound(c)
	}
	form := &views.QueueForm{Queue: name,
		Concurrency:   strings.TrimSpace(c.FormValue("concurrency")),
		RateLimit:     strings.TrimSpace(c.FormValue("rate_limit")),
		RatePeriod:    strings.TrimSpace(c.FormValue("rate_period_seconds")),
		PerKeyLimit:   strings.TrimSpace(c.FormValue("per_key_concurrency")),
		RateLimitOpen: true}
	patch, err := jobs.ParseQueuePatch(queueFormBody(form))
	if err == nil {
		_, err = s.applyQueuePatch(c, name, patch)
	}
	if err != nil {
		var ve *jobs.ValidationError
		if !asValidation(err, &ve) {
			return err
		}
		form.Field, form.Error = ve.Field, ve.Message
		toast(c, "Not saved: "+ve.Field+" "+ve.Message+".", toastBad)
		return s.queuesTable(c, form)
	}
	toast(c, "Limits of queue "+name+" saved.", toastOK)
	return s.queuesTable(c, nil)
}

// queueFormBody turns the limits form into the body PATCH takes, so the
// page and the API refuse the same things with the same words: an empty
// field removes the limit.
func queueFormBody(f *views.QueueForm) []byte {
	val := func(v string) json.RawMessage {
		if v == "" {
			return json.RawMessage("null")
		}
		if json.Valid([]byte(v)) && (v[0] >= '0' && v[0] <= '9' || v[0] == '-') {
			return json.RawMessage(v)
		}
		b, _ := json.Marshal(v) // not a number: refused with the field's message
		return b
	}
	body := map[string]any{"concurrency": val(f.Concurrency), "per_key_concurrency": val(f.PerKeyLimit)}
	switch {
	case f.RateLimit == "" && f.RatePeriod == "":
		body["rate_limit"] = nil
	default:
		rl := map[string]json.RawMessage{}
		if f.RateLimit != "" {
			rl["limit"] = val(f.RateLimit)
		}
		if f.RatePeriod != "" {
			rl["period_seconds"] = val(f.RatePeriod)
		}
		body["rate_limit"] = rl
	}
	b, _ := json.Marshal(body)
	return b
}

// asValidation is errors.As for the validation errors a form can cause.
func asValidation(err error, ve **jobs.ValidationError) bool {
	if e, ok := err.(*jobs.ValidationError); ok {
		*ve = e
		return true
	}
	return false
}
