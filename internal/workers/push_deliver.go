package workers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// pushBody is what a push request carries.
type pushBody struct {
	ID         uuid.UUID       `json:"id"`
	Type       string          `json:"type"`
	Queue      string          `json:"queue"`
	Payload    json.RawMessage `json:"payload"`
	Attempt    int             `json:"attempt"`
	MaxRetries int             `json:"max_retries"`
	LeaseToken uuid.UUID       `json:"lease_token"`
	Parents    jobs.Parents    `json:"parents,omitempty"`
	// Steps and Signals are what earlier attempts recorded and what
	// resumed the job's waits, for a durable job (as a claim has them).
	Steps   domain.StepsWire       `json:"steps,omitempty"`
	Signals map[string]jobs.Signal `json:"signals,omitempty"`
	// LeaseExpiresAt is when the lease ends unless the endpoint, having
	// answered 202, heartbeats it (POST /api/v1/jobs/{id}/heartbeat).
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
}

// deliver POSTs one job and decides its outcome from the answer.
func (p *Pusher) deliver(ctx context.Context, q domain.PushQueue, d *delivery) pushOutcome {
	j := d.job
	body, _ := json.Marshal(pushBody{ID: j.ID, Type: j.Type, Queue: j.Queue, Payload: j.Payload, Attempt: j.Attempt,
		MaxRetries: j.MaxRetries, LeaseToken: d.lease.Token, Parents: j.Parents, LeaseExpiresAt: j.LeaseExpiresAt,
		Steps: j.Steps, Signals: j.Signals})
	start := time.Now()
	rec := domain.PushDelivery{Queue: q.Name, JobID: j.ID, Attempt: j.Attempt, At: start}
	rctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	req, err := newPushRequest(rctx, q, j, body, start)
	if err != nil {
		rec.DurationMS = 0
		return retryPush(d, rec, domain.Backoff(j.Attempt, nil), "push to "+domain.RedactURL(q.URL)+": "+pushError(q, err))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		rec.DurationMS = time.Since(start).Milliseconds()
		return unanswered(ctx, rctx, q, d, rec, err)
	}
	defer resp.Body.Close()
	limit := int64(domain.MaxPushResultBytes)
	if resp.StatusCode/100 == 2 {
		limit = domain.MaxPushAnswerBytes // it may spawn jobs
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	rec.DurationMS = time.Since(start).Milliseconds()
	rec.StatusCode = resp.StatusCode
	return p.answered(q, d, rec, resp, answer)
}

// newPushRequest builds the signed POST of one job to its queue's
// endpoint; start stamps the signature.
func newPushRequest(ctx context.Context, q domain.PushQueue, j *jobs.Job, body []byte, start time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Flint-Push/1")
	req.Header.Set("Flint-Attempt", strconv.Itoa(j.Attempt))
	req.Header.Set("Flint-Queue", j.Queue)
	req.Header.Set("Flint-Type", j.Type)
	domain.WebhookHeaders(req.Header.Set, q.Secrets, j.ID.String(), start, body)
	if tp := tracing.FromContext(ctx); tp != "" {
		req.Header.Set("traceparent", tp) // the attempt's span: the endpoint's spans continue it
	}
	return req, nil
}

// retryPush is the outcome of a delivery to be tried again after delay,
// with msg as the job's error and the delivery record's.
func retryPush(d *delivery, rec domain.PushDelivery, delay time.Duration, msg string) pushOutcome {
	rec.Outcome, rec.Error = domain.PushRetry, msg
	return pushOutcome{finish: &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeFailed, Error: msg, RetryDelay: delay}, record: rec}
}

// unanswered is the outcome of a request that got no answer (err): handed
// back on shutdown, dropped when the lease was lost (ctx is the delivery's,
// rctx the request's own with the queue's timeout), retried otherwise.
func unanswered(ctx, rctx context.Context, q domain.PushQueue, d *delivery, rec domain.PushDelivery, err error) pushOutcome {
	j := d.job
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errPushShutdown):
		rec.Outcome, rec.Error = domain.PushRetry, "interrupted by shutdown"
		return pushOutcome{finish: &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeInterrupted, Error: errPushShutdown.Error()}, record: rec}
	case errors.Is(cause, domain.ErrLeaseLost):
		return pushOutcome{}
	case rctx.Err() != nil:
		return retryPush(d, rec, domain.Backoff(j.Attempt, nil), fmt.Sprintf("push to %s: no answer within %s", domain.RedactURL(q.URL), q.Timeout))
	}
	return retryPush(d, rec, domain.Backoff(j.Attempt, nil), fmt.Sprintf("push to %s: %s", domain.RedactURL(q.URL), pushError(q, err)))
}

// pushError is err as a job's error may say it: without the endpoint's
// URL, which is often a credential (a path token, a signed query) and is
// shown whole to admins only. The Go client quotes it in every error it
// returns (Post "https://…": dial tcp …); the job, its executions, its
// log, the DLQ and the queue's deliveries say only scheme and host.
func pushError(q domain.PushQueue, err error) string {
	return domain.RedactURLIn(logs.Scrub(withoutURL(err).Error()), q.URL)
}

// answered decides the outcome from the endpoint's answer (answer is its
// body, read up to one byte past the result limit), as the table at the
// top of pusher.go says.
func (p *Pusher) answered(q domain.PushQueue, d *delivery, rec domain.PushDelivery, resp *http.Response, answer []byte) pushOutcome {
	j := d.job
	what := fmt.Sprintf("push to %s answered %s", domain.RedactURL(q.URL), resp.Status)
	if s := domain.Truncate(domain.FirstLine(strings.TrimSpace(string(answer))), 300); s != "" && resp.StatusCode/100 != 2 {
		what += ": " + logs.Scrub(domain.RedactURLIn(s, q.URL))
	}
	switch {
	case strings.EqualFold(strings.TrimSpace(resp.Header.Get("Flint-No-Retry")), "true"):
		rec.Outcome, rec.Error = domain.PushFailed, what+" (Flint-No-Retry)"
		if resp.StatusCode/100 == 2 {
			rec.Error = what + " with Flint-No-Retry: true"
		}
		return pushOutcome{finish: &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeFailed, Error: rec.Error, Final: true}, record: rec}
	case resp.StatusCode == http.StatusGone:
		rec.Outcome, rec.Error = domain.PushGone, what+"; the queue's push is paused until it is set again"
		p.pausePush(q.Name, what)
		return pushOutcome{finish: &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeFailed, Error: rec.Error, Final: true}, record: rec}
	case resp.StatusCode == http.StatusAccepted:
		p.mu.Lock()
		delete(p.inFlight, j.ID) // the endpoint's heartbeats keep the lease now
		p.mu.Unlock()
		rec.Outcome = domain.PushAccepted
		return pushOutcome{record: rec}
	case resp.StatusCode/100 == 2:
		rec.Outcome = domain.PushCompleted
		f := p.completion(d, answer)
		if f.Outcome == domain.OutcomeFailed {
			rec.Outcome, rec.Error = domain.PushFailed, f.Error
		}
		return pushOutcome{finish: f, record: rec}
	}
	delay, given := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	if !given {
		delay = domain.Backoff(j.Attempt, nil)
	}
	out := retryPush(d, rec, delay, what)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		out.record.Outcome = domain.PushHeld
		p.holdPush(q.Name, time.Now().Add(delay))
	}
	return out
}

// completion is the finish of a job whose endpoint answered 2xx with
// answer: its result, and the jobs it spawns when the answer is a JSON
// object with a "spawn" list (taken out of the result). A spawn list
// that does not hold up fails the job for good, with the reason.
func (p *Pusher) completion(d *delivery, answer []byte) *domain.Finish {
	f := &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeSucceeded}
	r := bytes.TrimSpace(answer)
	if len(r) == 0 || len(answer) > domain.MaxPushAnswerBytes || !json.Valid(r) || bytes.Equal(r, []byte("null")) {
		return f
	}
	// JSON that cannot be stored fails this job alone, saying why.
	if err := jobs.CheckJSON("result", r); err != nil {
		return &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeFailed, RetryDelay: domain.Backoff(d.job.Attempt, nil),
			Error: "the endpoint answered JSON that cannot be stored; the result was refused: " + err.Error()}
	}
	if r[0] == '{' && bytes.Contains(r, []byte(`"status"`)) {
		if s, ok := p.suspension(d, r); ok {
			return s
		}
	}
	if r[0] == '{' && bytes.Contains(r, []byte(`"spawn"`)) {
		var fields map[string]json.RawMessage
		if json.Unmarshal(r, &fields) == nil && fields["spawn"] != nil {
			list, err := domain.ParseSpawn(fields["spawn"], p.types(), time.Now())
			if err != nil {
				return &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeFailed, Final: true,
					Error: "the endpoint's answer spawned jobs Flint refused: " + err.Error()}
			}
			f.Spawn = list
			delete(fields, "spawn")
			if len(fields) == 0 {
				return f
			}
			r, _ = json.Marshal(fields) // a map of raw values always encodes
		}
	}
	if len(r) <= domain.MaxPushResultBytes {
		f.Result = r
	}
	return f
}

// suspension reads a 2xx answer that sleeps or waits: {"status":
// "sleeping", "wake_at"} or {"status": "waiting", "signal" or "event",
// "timeout_seconds"}, as a pull worker's finish has them. One that does
// not hold up fails the job for good, with the reason; an answer with
// another status (or none) is a completion (ok false).
func (p *Pusher) suspension(d *delivery, answer []byte) (*domain.Finish, bool) {
	var a struct {
		Status string `json:"status"`
		domain.SuspendFields
	}
	if json.Unmarshal(answer, &a) != nil || (a.Status != "sleeping" && a.Status != "waiting") {
		return nil, false
	}
	w, err := a.Wait(a.Status, func(name string) string { return name }, time.Now())
	if err != nil {
		return &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeFailed, Final: true,
			Error: "the endpoint's answer asked to " + strings.TrimSuffix(a.Status, "ing") + " in a way Flint refused: " + err.Error()}, true
	}
	return &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeSuspended, Wait: w}, true
}

// types is what jobs spawned by endpoints may name.
func (p *Pusher) types() jobs.TypeSource {
	if p.cfg.Types != nil {
		return p.cfg.Types
	}
	return jobs.NewRegistry()
}

// retryAfter reads a Retry-After header: seconds or an HTTP date, capped
// at the longest backoff; given is false when there is none (or it does
// not parse).
func retryAfter(v string, now time.Time) (d time.Duration, given bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		d = time.Duration(min(n, int64(domain.MaxBackoff/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(max(d, time.Second), domain.MaxBackoff), true
}

// holdPush holds queue back here at once, and everywhere through the
// store.
func (p *Pusher) holdPush(queue string, until time.Time) {
	p.mu.Lock()
	if until.After(p.held[queue]) {
		p.held[queue] = until
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.store.HoldPush(ctx, queue, until); err != nil {
		p.logger.Warn("holding a push queue back failed", "queue", queue, "error", err)
	}
}

// pausePush stops pushing queue here at once, and everywhere through the
// store.
func (p *Pusher) pausePush(queue, reason string) {
	p.mu.Lock()
	if q, ok := p.queues[queue]; ok {
		q.Paused = true
		p.queues[queue] = q
	}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.store.PausePush(ctx, queue, reason); err != nil {
		p.logger.Warn("pausing a push queue failed", "queue", queue, "error", err)
	}
	p.logger.Warn("push endpoint answered 410 Gone; pushing paused until the push is set again", "queue", queue)
}
