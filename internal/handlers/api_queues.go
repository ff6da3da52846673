// Queues as things an operator manages: the API and the Queues page.

package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// queueName reads the :name parameter, refusing what cannot name a queue.
func queueName(c *fiber.Ctx) (string, error) {
	name := c.Params("name")
	if !jobs.ValidQueue(name) {
		return "", invalid("name", fmt.Sprintf("must be 1-%d letters, digits or _ . : -", jobs.MaxQueueLen))
	}
	return name, nil
}

// listQueues handles GET /api/v1/queues: every queue with jobs or settings.
func (s *server) listQueues(c *fiber.Ctx) error {
	qs, err := s.queueStore.ListQueues(c.UserContext())
	if err != nil {
		return err
	}
	for i := range qs {
		qs[i] = queueForCaller(c, qs[i])
	}
	return c.JSON(fiber.Map{"queues": qs})
}

// queueForCaller is q as the caller may see it: a push URL (which may
// carry a token) whole for admins, its scheme and host for others.
func queueForCaller(c *fiber.Ctx, q domain.QueueInfo) domain.QueueInfo {
	if q.Push != nil && !seesSecrets(c) {
		t := *q.Push
		t.URL = domain.RedactURL(t.URL)
		q.Push = &t
	}
	return q
}

// getQueue handles GET /api/v1/queues/:name.
func (s *server) getQueue(c *fiber.Ctx) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	q, err := s.queueStore.GetQueue(c.UserContext(), name)
	if err != nil {
		return err
	}
	if q.Push != nil {
		if q.RecentDeliveries, err = s.queueStore.PushDeliveries(c.UserContext(), name, domain.PushDeliveriesPerPage); err != nil {
			return err
		}
	}
	return c.JSON(queueForCaller(c, q))
}

// queueAfter reads a queue after a change; a queue with neither jobs nor
// settings cannot be missing then, but a paused empty queue has settings.
func (s *server) queueAfter(c *fiber.Ctx, st domain.QueueSettings) (domain.QueueInfo, error) {
	q, err := s.queueStore.GetQueue(c.UserContext(), st.Name)
	if err != nil {
		return domain.QueueInfo{QueueSettings: st}, err
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

func (s *server) setPaused(c *fiber.Ctx, name string, paused bool) (domain.QueueSettings, error) {
	actor := auditActor(c).Actor
	st, err := s.queueStore.UpdateQueue(c.UserContext(), name, actor, func(q domain.QueueSettings) domain.QueueSettings {
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
	patch, err := domain.ParseQueuePatch(c.Body())
	if err != nil {
		return err
	}
	if err := s.checkPush(c, patch); err != nil {
		return err
	}
	st, err := s.applyQueuePatch(c, name, patch)
	if err != nil {
		return err
	}
	if patch.SetPush && patch.Push != nil {
		if _, err := s.typeStore.RecordSchemas(c.UserContext(), patch.Push.Schemas,
			domain.SchemaAuthor{Source: domain.SchemaFromQueue, Queue: name}); err != nil {
			return err
		}
	}
	q, err := s.queueAfter(c, st)
	if err != nil {
		return err
	}
	if q.Push != nil && st.Push != nil {
		q.Push.Secret = st.Push.Secret // a new push's secret, shown this once
	}
	return c.JSON(queueForCaller(c, q))
}

// checkPush refuses a push URL the SSRF guard would refuse to reach.
func (s *server) checkPush(c *fiber.Ctx, patch domain.QueuePatch) error {
	if !patch.SetPush || patch.Push == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 5*time.Second)
	defer cancel()
	if err := s.pushGuard.Check(ctx, patch.Push.URL); err != nil {
		return invalid("push.url", "Flint may not push there: "+err.Error())
	}
	return nil
}

// rotatePushSecret handles POST /api/v1/queues/:name/push/rotate: a new
// signing secret, shown once; the replaced one goes on signing until it
// is revoked.
func (s *server) rotatePushSecret(c *fiber.Ctx) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	secret, err := s.queueStore.RotatePushSecret(c.UserContext(), name, auditActor(c).Actor)
	if err != nil {
		return pushSecretError(err)
	}
	s.audit(c, "queue_push_rotate", map[string]any{"queue": name})
	return c.JSON(fiber.Map{"queue": name, "secret": secret, "secrets": 2})
}

// revokePushSecret handles POST /api/v1/queues/:name/push/revoke: the
// secret the last rotation replaced stops signing.
func (s *server) revokePushSecret(c *fiber.Ctx) error {
	name, err := queueName(c)
	if err != nil {
		return err
	}
	if err := s.queueStore.RevokePushSecret(c.UserContext(), name, auditActor(c).Actor); err != nil {
		return pushSecretError(err)
	}
	s.audit(c, "queue_push_revoke", map[string]any{"queue": name})
	return c.JSON(fiber.Map{"queue": name, "secrets": 1})
}

// pushSecretError maps the refusals of a rotation or revocation.
func pushSecretError(err error) error {
	switch {
	case errors.Is(err, domain.ErrNoPush):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "this queue does not push its jobs; set push first (PATCH /api/v1/queues/{name})"}
	case errors.Is(err, domain.ErrPreviousSecret), errors.Is(err, domain.ErrNoPreviousSecret):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	}
	return err
}

func (s *server) applyQueuePatch(c *fiber.Ctx, name string, patch domain.QueuePatch) (domain.QueueSettings, error) {
	st, err := s.queueStore.UpdateQueue(c.UserContext(), name, auditActor(c).Actor, patch.Apply)
	if err != nil {
		return st, err
	}
	if s.wake != nil {
		s.wake(name) // a raised limit may let waiting jobs start
	}
	details := patch.Changes()
	details["queue"] = name
	if patch.SetPush && patch.Push != nil {
		// The trail keeps where it points, not what may be a token.
		details["push"] = map[string]any{"url": domain.RedactURL(patch.Push.URL), "url_fingerprint": domain.URLFingerprint(patch.Push.URL),
			"timeout_seconds": patch.Push.TimeoutSeconds}
	}
	s.audit(c, "queue_limits", details)
	return st, nil
}

// The Queues page.

func (s *server) queuesPage(c *fiber.Ctx) error {
	qs, err := s.queueStore.ListQueues(c.UserContext())
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "queues-live" {
		return render(c, http.StatusOK, views.QueuesTable(qs, nil))
	}
	return render(c, http.StatusOK, views.QueuesPage(s.chrome(c, "Queues", "queues", true), qs))
}

// queuePage handles GET /queues/:name: what a queue holds, its limits,
// throughput and recent failures and, for a push queue, its endpoint and
// latest pushes.
func (s *server) queuePage(c *fiber.Ctx) error {
	name := c.Params("name")
	if !jobs.ValidQueue(name) {
		return s.notFound(c)
	}
	v, err := s.queueView(c, name, nil)
	if errors.Is(err, domain.ErrNotFound) {
		return s.notFound(c)
	}
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "queue-live" {
		return render(c, http.StatusOK, views.QueueDetail(v))
	}
	return render(c, http.StatusOK, views.QueuePage(s.chrome(c, "Queue "+name, "queues", true), v))
}

// queueView reads what a queue's page shows; typed is its limits form as
// just refused, if it was.
func (s *server) queueView(c *fiber.Ctx, name string, typed *views.QueueForm) (views.QueueView, error) {
	ctx := c.UserContext()
	v := views.QueueView{Typed: typed, Now: s.clock.Now()}
	q, err := s.queueStore.GetQueue(ctx, name)
	if err != nil {
		return v, err
	}
	if q.Push != nil {
		if q.RecentDeliveries, err = s.queueStore.PushDeliveries(ctx, name, domain.PushDeliveriesPerPage); err != nil {
			return v, err
		}
	}
	v.Queue = queueForCaller(c, q)
	if v.Throughput, err = s.dash.ThroughputOver(ctx, name, time.Hour, time.Minute); err != nil {
		return v, err
	}
	v.Failures, err = s.dash.RecentFailures(ctx, name, 8)
	return v, err
}

// queueAnswer answers an action taken on the Queues page with its table,
// or on a queue's page with that page's live part; form is the limits
// form as refused (422), if it was.
func (s *server) queueAnswer(c *fiber.Ctx, name string, form *views.QueueForm) error {
	status := http.StatusOK
	if form != nil && form.Error != "" {
		status = http.StatusUnprocessableEntity
	}
	if c.Get("HX-Target") == "queue-live" {
		v, err := s.queueView(c, name, form)
		if err != nil {
			return err
		}
		return render(c, status, views.QueueDetail(v))
	}
	qs, err := s.queueStore.ListQueues(c.UserContext())
	if err != nil {
		return err
	}
	return render(c, status, views.QueuesTable(qs, form))
}

// queuePauseHTML pauses or resumes a queue from the Queues page or the
// queue's own page.
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
		return s.queueAnswer(c, name, nil)
	}
}

// queueLimitsHTML saves the limits form of one queue. Empty fields mean
// no limit; a refusal answers 422 with the form as typed and what to fix,
// in the form's words.
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
	patch, err := domain.ParseQueuePatch(queueFormBody(form))
	if err == nil {
		_, err = s.applyQueuePatch(c, name, patch)
	}
	if err != nil {
		var ve *jobs.ValidationError
		if !asValidation(err, &ve) {
			return err
		}
		form.Field, form.Error = ve.Field, ve.Message
		toast(c, "Not saved: "+views.LimitLabel(ve.Field)+": "+views.LimitError(ve.Message), toastBad)
		return s.queueAnswer(c, name, form)
	}
	toast(c, "Limits of queue "+name+" saved.", toastOK)
	return s.queueAnswer(c, name, nil)
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
