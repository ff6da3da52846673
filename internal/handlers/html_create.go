// The form that creates a job or a recurring series.

package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

func (s *server) createPage(c *fiber.Ctx) error {
	f := views.CreateForm{Values: map[string]string{"type": jobs.TypeNoop, "payload": "{}", "priority": "medium"}, Errors: map[string]string{}, Types: s.types.Known()}
	if clone := c.Query("clone"); clone != "" {
		if id, err := uuid.Parse(clone); err == nil {
			if j, err := s.jobStore.GetJob(c.UserContext(), id); err == nil {
				f.Values = map[string]string{"type": j.Type, "queue": j.Queue, "priority": views.PriorityLabel(j.Priority),
					"payload": views.EditableJSON(payloadForCaller(c, j)), "max_retries": strconv.Itoa(j.MaxRetries)}
				if j.TimeoutSeconds > 0 {
					f.Values["timeout_seconds"] = strconv.Itoa(j.TimeoutSeconds)
				}
			}
		}
	} else if t := c.Query("type"); t != "" && slices.Contains(f.Types, t) {
		f.Values["type"] = t
	}
	s.withSchemaFields(c.UserContext(), &f, nil)
	return render(c, http.StatusOK, views.CreatePage(s.chrome(c, "Create a job", "jobs", false), f))
}

var createFields = []string{"type", "queue", "priority", "payload", "run_at", "delay_seconds", "max_retries",
	"timeout_seconds", "interval_seconds", "cron", "timezone", "depends_on", "idempotency_key"}

func (s *server) createJob(c *fiber.Ctx) error {
	f := views.CreateForm{Values: map[string]string{}, Errors: map[string]string{}, Types: s.types.Known()}
	for _, k := range createFields {
		f.Values[k] = c.FormValue(k)
	}
	s.withSchemaFields(c.UserContext(), &f, func(name string) string { return c.FormValue(name) })
	payload, ok := composePayload(&f)
	if !ok {
		return render(c, http.StatusUnprocessableEntity, views.CreateFormPartial(f))
	}
	values := maps.Clone(f.Values)
	values["payload"] = payload
	p, field, err := s.formParams(c.UserContext(), values)
	if err == nil {
		var res []jobs.Enqueued
		res, err = s.jobStore.Enqueue(c.UserContext(), p)
		if err == nil {
			s.enqueued(res)
			s.audit(c, "create", map[string]string{"type": res[0].Job.Type}, res[0].Job.ID)
			s.logger.InfoContext(c.UserContext(), "job created from the dashboard", "component", "dashboard",
				"job_id", res[0].Job.ID, "type", res[0].Job.Type, "actor", dashActor(c))
			return redirectHX(c, "/jobs/"+res[0].Job.ID.String())
		}
		var ve *jobs.ValidationError
		if errors.As(err, &ve) {
			field = ve.Field
		}
	}
	var ve *jobs.ValidationError
	var ae *apiError
	switch {
	case errors.As(err, &ve) && schemaFieldError(&f, ve.Field, ve.Message):
	case errors.As(err, &ae) && schemaFieldError(&f, ae.Field, ae.Message):
	case errors.As(err, &ve):
		f.Errors[formField(field, ve.Field)] = ve.Message
	case errors.As(err, &ae):
		f.Errors[formField(field, ae.Field)] = ae.Message
	default:
		return err
	}
	if len(f.Errors) == 1 {
		for k := range f.Errors {
			if !slices.Contains(createFields, k) {
				f.Message = f.Errors[k]
			}
		}
	}
	return render(c, http.StatusUnprocessableEntity, views.CreateFormPartial(f))
}

// formField maps an error's field ("depends_on[2]", "payload") to the form
// field that shows it.
func formField(hint, field string) string {
	if field == "" {
		field = hint
	}
	if i := strings.IndexAny(field, "[."); i >= 0 {
		field = field[:i]
	}
	return field
}

// formParams turns the create form into enqueue parameters through the same
// validation as the API.
func (s *server) formParams(ctx context.Context, v map[string]string) (jobs.EnqueueParams, string, error) {
	r := enqueueRequest{Type: v["type"], Queue: strings.TrimSpace(v["queue"])}
	if pl := strings.TrimSpace(v["payload"]); pl != "" {
		r.Payload = json.RawMessage(pl)
	}
	if p := v["priority"]; p != "" {
		var pv priorityValue
		if err := pv.UnmarshalJSON([]byte(strconv.Quote(p))); err != nil {
			return jobs.EnqueueParams{}, "priority", invalid("priority", "choose high, medium or low")
		}
		r.Priority = &pv
	}
	intField := func(name string, dst **int) error {
		if s := strings.TrimSpace(v[name]); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return invalid(name, "must be a whole number")
			}
			*dst = &n
		}
		return nil
	}
	if err := intField("max_retries", &r.MaxRetries); err != nil {
		return jobs.EnqueueParams{}, "max_retries", err
	}
	if err := intField("timeout_seconds", &r.TimeoutSeconds); err != nil {
		return jobs.EnqueueParams{}, "timeout_seconds", err
	}
	if s := strings.TrimSpace(v["delay_seconds"]); s != "" {
		d, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return jobs.EnqueueParams{}, "delay_seconds", invalid("delay_seconds", "must be a number of seconds")
		}
		r.DelaySeconds = &d
	}
	if s := strings.TrimSpace(v["interval_seconds"]); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return jobs.EnqueueParams{}, "interval_seconds", invalid("interval_seconds", "must be a whole number of seconds")
		}
		r.IntervalSeconds = &n
	}
	if s := strings.TrimSpace(v["run_at"]); s != "" {
		t, err := time.Parse("2006-01-02T15:04:05", s)
		if err != nil {
			t, err = time.Parse("2006-01-02T15:04", s)
		}
		if err != nil {
			return jobs.EnqueueParams{}, "run_at", invalid("run_at", "must be a date and time")
		}
		iso := t.UTC().Format(time.RFC3339)
		r.RunAt = &iso
	}
	for name, dst := range map[string]**string{"cron": &r.Cron, "timezone": &r.Timezone, "idempotency_key": &r.IdempotencyKey} {
		if s := strings.TrimSpace(v[name]); s != "" {
			*dst = &s
		}
	}
	if s := strings.TrimSpace(v["depends_on"]); s != "" {
		r.DependsOn = append(r.DependsOn, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' || r == '\r' || r == '\t' })...)
	}
	p, err := r.params(ctx, s.types, s.clock.Now(), "", parseJobRef)
	if err != nil {
		return p, "", err
	}
	s.applyDefaults(&p)
	return p, "", nil
}
