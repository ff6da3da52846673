package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// outcomeRequest is one entry of POST /api/v1/workers/{id}/finish.
type outcomeRequest struct {
	JobID             *string         `json:"job_id"`
	LeaseToken        *string         `json:"lease_token"`
	Status            string          `json:"status"`
	Result            json.RawMessage `json:"result"`
	Error             *string         `json:"error"`
	Retryable         *bool           `json:"retryable"`
	RetryAfterSeconds *float64        `json:"retry_after_seconds"`
	// Spawn adds jobs to the job's workflow with its completion.
	Spawn json.RawMessage `json:"spawn"`
	// Traceparent is the trace context the attempt ran as (the claim's
	// traceparent); malformed, it is ignored.
	Traceparent string `json:"traceparent"`
	// ReplayedSteps names the steps the run returned from the claim's
	// steps without running them: events on the attempt's span. Like the
	// traceparent, what is malformed in it is ignored.
	ReplayedSteps []string `json:"replayed_steps"`
	// wake_at, signal, event and timeout_seconds end the attempt
	// sleeping or waiting (domain.SuspendFields).
	domain.SuspendFields
}

// outcomeResult is the answer for one outcome: applied (ok, with the
// job's new status: dead_letter for a completion whose spawn the store
// refused, the reason in the job's last_error) or not (lease_lost).
type outcomeResult struct {
	JobID  uuid.UUID  `json:"job_id"`
	OK     bool       `json:"ok"`
	Status jobs.State `json:"status,omitempty"`
	// Error is lease_lost (nothing was applied) or result_refused (the
	// result cannot be stored; the job was failed instead, saying why in
	// Message).
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// finishWork handles POST /api/v1/workers/{id}/finish: many outcomes in
// one statement. A malformed outcome refuses the whole request (nothing
// is applied); an outcome whose lease is no longer the worker's changes
// nothing and answers lease_lost; a result that cannot be stored fails
// its job alone, saying why, and answers result_refused.
func (s *server) finishWork(c *fiber.Ctx) error {
	var req struct {
		Outcomes []outcomeRequest `json:"outcomes"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Outcomes) == 0 {
		return invalid("outcomes", "give at least one outcome")
	}
	if len(req.Outcomes) > maxOutcomes {
		return invalid("outcomes", fmt.Sprintf("holds %d outcomes; the limit is %d per request", len(req.Outcomes), maxOutcomes))
	}
	batch := make([]domain.Finish, len(req.Outcomes))
	ids := make([]uuid.UUID, len(req.Outcomes))
	refused := make([]string, len(req.Outcomes))
	now := s.clock.Now()
	for i, o := range req.Outcomes {
		at := fmt.Sprintf("outcomes[%d]", i)
		f, why, err := o.finish(at, now)
		if err != nil {
			return err
		}
		refused[i] = why
		if f.Spawn, err = s.parseSpawn(c, o.Spawn, at, now); err != nil {
			return err
		}
		if slices.Contains(ids[:i], f.JobID) {
			return invalid(fmt.Sprintf("outcomes[%d].job_id", i), "lists a job twice")
		}
		batch[i], ids[i] = f, f.JobID
	}
	w, err := s.worker(c)
	if err != nil {
		return err
	}
	wa := s.work
	ctx := c.UserContext()
	claimed, err := wa.cfg.Store.ClaimedBy(ctx, w.ID, ids)
	if err != nil {
		return err
	}
	for i := range batch {
		cl, live := claimed[batch[i].JobID]
		if live && !cl.Mine {
			return invalid(fmt.Sprintf("outcomes[%d].job_id", i), fmt.Sprintf("this worker never claimed job %s; nothing was applied "+
				"(a push endpoint that answered 202 finishes its job with POST /api/v1/jobs/{id}/finish)", batch[i].JobID))
		}
		if batch[i].Outcome == domain.OutcomeFailed && batch[i].RetryDelay == 0 && !batch[i].Final {
			batch[i].RetryDelay = domain.Backoff(cl.Attempt, nil)
		}
		traceSpawned(batch[i].Spawn, req.Outcomes[i].Traceparent, cl.Traceparent, batch[i].Lease)
	}
	finished, cascaded, err := wa.cfg.Store.FinishJobs(ctx, batch)
	if err != nil {
		return err
	}
	domain.LogFailures(ctx, s.logger.With("worker_id", w.ID), batch, finished)
	traceFinished(ctx, w.ID, req.Outcomes, batch, finished, claimed, now)
	out := make([]outcomeResult, len(finished))
	var moved []domain.Moved
	for i, m := range finished {
		out[i] = outcomeResult{JobID: batch[i].JobID, OK: !m.LeaseLost() && refused[i] == "", Status: m.Status}
		switch {
		case m.LeaseLost():
			out[i].Error = "lease_lost"
		case refused[i] != "":
			out[i].Error, out[i].Message = "result_refused", refused[i]
			moved = append(moved, m)
		default:
			moved = append(moved, m)
		}
	}
	if wa.cfg.OnMoved != nil {
		if moved = append(moved, cascaded...); len(moved) > 0 {
			wa.cfg.OnMoved(moved)
		}
	}
	return c.JSON(fiber.Map{"outcomes": out})
}

// finish validates one outcome into a domain.Finish; at names it. A result
// that cannot be stored turns the outcome into a failure that says why
// (returned as refused too), so its neighbours are applied as sent.
func (o outcomeRequest) finish(at string, now time.Time) (f domain.Finish, refused string, err error) {
	field := func(name string) string { return join(at, name) }
	lease, err := leaseOf(o.JobID, o.LeaseToken, field)
	if err != nil {
		return f, "", err
	}
	f.Lease = lease
	if o.Error != nil {
		f.Error = logs.Scrub(*o.Error)
	}
	if o.Retryable != nil && o.Status != "failed" {
		return f, "", invalid(field("retryable"), "applies to failed outcomes only")
	}
	if o.RetryAfterSeconds != nil && o.Status != "failed" {
		return f, "", invalid(field("retry_after_seconds"), "applies to failed outcomes only")
	}
	hasResult := len(o.Result) > 0 && !bytes.Equal(bytes.TrimSpace(o.Result), []byte("null"))
	if hasResult && o.Status != "completed" {
		return f, "", invalid(field("result"), "applies to completed outcomes only")
	}
	if len(o.Spawn) > 0 && !bytes.Equal(bytes.TrimSpace(o.Spawn), []byte("null")) && o.Status != "completed" {
		return f, "", invalid(field("spawn"), "applies to completed outcomes only: jobs are spawned with the completion")
	}
	if f.Wait, err = o.Wait(o.Status, field, now); err != nil || f.Wait != nil {
		f.Outcome = domain.OutcomeSuspended
		return f, "", err
	}
	switch o.Status {
	case "completed":
		f.Outcome = domain.OutcomeSucceeded
		if hasResult {
			if len(o.Result) > jobs.MaxResultBytes {
				return f, "", invalid(field("result"), fmt.Sprintf("is %d bytes; the limit is %d", len(o.Result), jobs.MaxResultBytes))
			}
			f.Result = bytes.TrimSpace(o.Result)
			if err := jobs.CheckJSON(field("result"), f.Result); err != nil {
				refused = err.Error()
				f.Outcome, f.Result, f.Error = domain.OutcomeFailed, nil, "the worker's result was refused: "+refused
			}
		}
	case "failed":
		f.Outcome = domain.OutcomeFailed
		if f.Error == "" {
			f.Error = "failed (the worker gave no error)"
		}
		f.Final = o.Retryable != nil && !*o.Retryable
		if o.RetryAfterSeconds != nil {
			ra := *o.RetryAfterSeconds
			if math.IsNaN(ra) || ra < 0 || ra > domain.MaxBackoff.Seconds() {
				return f, "", invalid(field("retry_after_seconds"), fmt.Sprintf("must be between 0 and %d", int(domain.MaxBackoff.Seconds())))
			}
			if f.Final {
				return f, "", invalid(field("retry_after_seconds"), "a failure that is not retryable is not retried")
			}
			f.RetryDelay = max(time.Duration(ra*float64(time.Second)), time.Millisecond)
		}
	case "cancelled":
		f.Outcome = domain.OutcomeCancelled
		if f.Error == "" {
			f.Error = "cancelled by the worker"
		}
	case "":
		return f, "", invalid(field("status"), "is required: completed, failed, cancelled, sleeping or waiting")
	default:
		return f, "", invalid(field("status"), fmt.Sprintf("unknown status %q: use completed, failed, cancelled, sleeping or waiting", o.Status))
	}
	return f, refused, nil
}

// parseSpawn checks an outcome's spawn list (raw, which may be absent);
// at names the outcome in errors.
func (s *server) parseSpawn(c *fiber.Ctx, raw json.RawMessage, at string, now time.Time) ([]jobs.Spawned, error) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	list, err := domain.ParseSpawn(raw, domain.Prepared(c.UserContext(), s.types), now)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		return nil, invalid(join(at, ve.Field), ve.Message)
	}
	return list, err
}

// jobLogRequest is the body of POST /api/v1/jobs/{id}/logs.
type jobLogRequest struct {
	LeaseToken *string `json:"lease_token"`
	Lines      []struct {
		Level   string         `json:"level"`
		Message *string        `json:"message"`
		Attrs   map[string]any `json:"attrs"`
		At      *time.Time     `json:"at"`
	} `json:"lines"`
}

// appendJobLog handles POST /api/v1/jobs/{id}/logs: lines a remote
// worker's handler logged, stored with the job's attempt (scrubbed of
// secrets and capped like the lines of in-process handlers).
func (s *server) appendJobLog(c *fiber.Ctx) error {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return badRequest("invalid_id", "id", "the job id in the path must be a UUID")
	}
	var req jobLogRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	idText := id.String()
	lease, err := leaseOf(&idText, req.LeaseToken, func(name string) string { return name })
	if err != nil {
		return err
	}
	if len(req.Lines) == 0 {
		return invalid("lines", "give at least one line")
	}
	if len(req.Lines) > maxLogLines {
		return invalid("lines", fmt.Sprintf("holds %d lines; the limit is %d per request", len(req.Lines), maxLogLines))
	}
	now := s.clock.Now()
	lines := make([]domain.LogEntry, len(req.Lines))
	for i, l := range req.Lines {
		f := func(name string) string { return fmt.Sprintf("lines[%d].%s", i, name) }
		switch l.Level {
		case "debug", "info", "warn", "error":
		case "":
			l.Level = "info"
		default:
			return invalid(f("level"), fmt.Sprintf("unknown level %q: use debug, info, warn or error", l.Level))
		}
		if l.Message == nil || *l.Message == "" {
			return invalid(f("message"), "is required")
		}
		if len(*l.Message) > maxLogMessage {
			return invalid(f("message"), fmt.Sprintf("is %d bytes; the limit is %d", len(*l.Message), maxLogMessage))
		}
		at := now
		if l.At != nil && l.At.Before(now.Add(time.Minute)) && l.At.After(now.Add(-24*time.Hour)) {
			at = *l.At
		}
		lines[i] = domain.LogEntry{JobID: id, At: at, Level: l.Level, Message: logs.Scrub(*l.Message), Attrs: scrubAttrs(l.Attrs)}
	}
	h, err := s.leaseHolder(c, lease)
	if err != nil {
		return err
	}
	for i := range lines {
		lines[i].Attempt = h.Attempt
	}
	if err := s.work.cfg.Store.InsertJobLogs(c.UserContext(), lines); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"stored": len(lines)})
}

// scrubAttrs hides the values of secret-looking keys and scrubs strings,
// as the process log does.
func scrubAttrs(attrs map[string]any) map[string]any {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]any, len(attrs))
	for k, v := range attrs {
		switch {
		case logs.IsSecretKey(k):
			out[k] = "[redacted]"
		default:
			if s, ok := v.(string); ok {
				v = logs.Scrub(s)
			}
			out[k] = v
		}
	}
	return out
}
