package domain

import (
	"encoding/json"
	"errors"
	"net/url"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// Limits of push targets.
const (
	MaxPushURL         = 2048
	DefaultPushTimeout = 60
	MaxPushTimeout     = 1800
	MaxPushResultBytes = 64 << 10
	// MaxPushAnswerBytes bounds a 2xx answer read whole: its result (at
	// most MaxPushResultBytes) and the jobs it spawns, like a request body.
	MaxPushAnswerBytes    = 16 << 20
	PushDeliveriesPerPage = 50
)

// PushTarget is the endpoint a push queue's jobs are POSTed to, and its
// state.
type PushTarget struct {
	URL            string `json:"url"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	// Secrets counts the signing secrets in use: 2 while a rotated-out one
	// still signs (until it is revoked).
	Secrets int `json:"secrets"`
	// PausedAt is set when the endpoint answered 410 Gone: nothing is
	// pushed until the push is set again.
	PausedAt     *time.Time `json:"paused_at"`
	PausedReason string     `json:"paused_reason,omitempty"`
	// HeldUntil is set when the endpoint answered 429 or 503: the queue's
	// pushes wait until then.
	HeldUntil *time.Time `json:"held_until"`
	// Secret is the new signing secret, shown only in the answer that
	// made it (setting a push up, or a rotation).
	Secret string `json:"secret,omitempty"`
}

// Errors of a push queue's secrets.
var (
	ErrNoPush           = errors.New("the queue does not push its jobs")
	ErrPreviousSecret   = errors.New("the secret the last rotation replaced still signs; revoke it first")
	ErrNoPreviousSecret = errors.New("no replaced secret signs; nothing to revoke")
)

// PushConfig is what an operator sets for a push queue.
type PushConfig struct {
	URL            string
	TimeoutSeconds int
	// Schemas are payload schemas, by job type, for the types the
	// endpoint takes: stored with the types (not the queue), so every API
	// process checks those types' payloads against them.
	Schemas map[string]*jobs.PayloadSchema
}

// PushDelivery is one attempt to push a job, as the queue's page shows
// it.
type PushDelivery struct {
	Queue      string    `json:"queue"`
	JobID      uuid.UUID `json:"job_id"`
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code"` // 0: no answer (refused, timed out)
	Outcome    string    `json:"outcome"`     // completed, accepted, retry, failed, held, paused
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// PushQueue is what the pusher needs of one push queue.
type PushQueue struct {
	Name    string
	URL     string
	Timeout time.Duration
	// Secrets sign each request: the current one first, then the one a
	// rotation replaced until it is revoked.
	Secrets   []string
	Paused    bool       // the queue is paused, or its push paused (410)
	HeldUntil *time.Time // 429/503: nothing pushed before
}

// Push delivery outcomes.
const (
	PushCompleted = "completed" // 2xx: the job completed
	PushAccepted  = "accepted"  // 202: the endpoint finishes it later
	PushRetry     = "retry"     // failed, retried with backoff
	PushHeld      = "held"      // 429/503: retried, and the queue held back
	PushFailed    = "failed"    // failed for good (Flint-No-Retry)
	PushGone      = "gone"      // 410: failed for good, the queue's push paused
)

// parsePush reads {"url", "timeout_seconds"}, or null to turn pushing
// off. The URL's syntax is checked here; whether the SSRF guard lets
// Flint reach it is the caller's check (it resolves the host).
func parsePush(v json.RawMessage) (*PushConfig, error) {
	if isNull(v) {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil || raw == nil {
		return nil, jobs.Invalid("push", `must be an object such as {"url": "https://example.com/jobs", "timeout_seconds": 60}, or null to stop pushing`)
	}
	for k := range raw {
		if k != "url" && k != "timeout_seconds" && k != "schemas" {
			return nil, jobs.Invalid("push."+k, "is not part of a push target (give url and, optionally, timeout_seconds and schemas)")
		}
	}
	c := &PushConfig{TimeoutSeconds: DefaultPushTimeout}
	uv, ok := raw["url"]
	if !ok || isNull(uv) {
		return nil, jobs.Invalid("push.url", "is required: the http(s) URL Flint POSTs each job to")
	}
	if err := json.Unmarshal(uv, &c.URL); err != nil {
		return nil, jobs.Invalid("push.url", "must be a string: an http(s) URL")
	}
	if err := CheckPushURL(c.URL); err != nil {
		return nil, err
	}
	if tv, ok := raw["timeout_seconds"]; ok && !isNull(tv) {
		t, err := parseLimit("push.timeout_seconds", tv, MaxPushTimeout)
		if err != nil || t == nil {
			return nil, jobs.Invalid("push.timeout_seconds", "must be a whole number of seconds from 1 to %d", MaxPushTimeout)
		}
		c.TimeoutSeconds = *t
	}
	var err error
	if c.Schemas, err = ParseSchemas("push.schemas", raw["schemas"], nil); err != nil {
		return nil, err
	}
	return c, nil
}

// CheckPushURL checks a push URL's form: absolute http or https, a host,
// no user info, at most MaxPushURL bytes.
func CheckPushURL(raw string) error {
	if len(raw) > MaxPushURL || !jobs.CleanText(raw) {
		return jobs.Invalid("push.url", "must be an http(s) URL of at most %d characters", MaxPushURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return jobs.Invalid("push.url", "is not a URL: %v", err)
	}
	if err := checkURLSyntax(u); err != nil {
		return jobs.Invalid("push.url", "%s", err.Error())
	}
	return nil
}
