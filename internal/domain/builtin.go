package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flinthq/flint/internal/jsonutil"
	"github.com/flinthq/flint/jobs"
)

// IsBuiltin reports whether jobType is one of the built-in types, which
// every Flint process runs and no program may register again.
func IsBuiltin(jobType string) bool {
	switch jobType {
	case jobs.TypeNoop, jobs.TypeSleep, jobs.TypeFail, jobs.TypeHTTPRequest, jobs.TypeSendEmail:
		return true
	}
	return false
}

// BuiltinDeps carries what the built-in handlers need from outside.
type BuiltinDeps struct {
	// Mailer delivers send_email jobs. Nil leaves send_email unregistered.
	Mailer Mailer
	// HTTP configures http_request. Its zero value is the strict SSRF guard.
	HTTP HTTPConfig
}

// RegisterBuiltins registers noop, sleep, fail, http_request and (when a
// Mailer is given) send_email.
func RegisterBuiltins(reg *jobs.Registry, deps BuiltinDeps) {
	reg.Register(jobs.TypeNoop, jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) { return nil, nil }))
	reg.Register(jobs.TypeSleep, sleepHandler{})
	reg.Register(jobs.TypeFail, failHandler{})
	reg.Register(jobs.TypeHTTPRequest, NewHTTPRequestHandler(deps.HTTP))
	if deps.Mailer != nil {
		reg.Register(jobs.TypeSendEmail, NewSendEmailHandler(deps.Mailer))
	}
}

// sleepPayload is {"ms": N}.
type sleepPayload struct {
	MS *int64 `json:"ms"`
}

// maxSleep bounds the sleep job; anything longer is better as a delayed job.
const maxSleep = 24 * time.Hour

type sleepHandler struct{}

func (sleepHandler) ValidatePayload(payload json.RawMessage) error {
	var p sleepPayload
	if err := jsonutil.DecodeStrict(payload, &p); err != nil {
		return err
	}
	if p.MS == nil {
		return errors.New(`needs "ms", the milliseconds to sleep`)
	}
	if *p.MS < 0 || time.Duration(*p.MS)*time.Millisecond > maxSleep {
		return fmt.Errorf(`"ms" must be between 0 and %d`, maxSleep.Milliseconds())
	}
	return nil
}

// Work sleeps for ms milliseconds, returning early with the context's error
// when the job is cancelled, times out or the worker drains.
func (sleepHandler) Work(ctx context.Context, job *jobs.Job) (any, error) {
	var p sleepPayload
	if err := jsonutil.DecodeStrict(job.Payload, &p); err != nil || p.MS == nil {
		return nil, jobs.Permanent(fmt.Errorf("bad payload: %v", err))
	}
	t := time.NewTimer(time.Duration(*p.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return map[string]any{"slept_ms": *p.MS}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// failPayload is {"message": "...", "times": N}.
type failPayload struct {
	Message string `json:"message"`
	Times   *int   `json:"times"`
}

type failHandler struct{}

func (failHandler) ValidatePayload(payload json.RawMessage) error {
	var p failPayload
	if err := jsonutil.DecodeStrict(payload, &p); err != nil {
		return err
	}
	if p.Times != nil && (*p.Times < 0 || *p.Times > jobs.MaxRetriesLimit+1) {
		return fmt.Errorf(`"times" must be between 0 and %d`, jobs.MaxRetriesLimit+1)
	}
	if len(p.Message) > 4096 {
		return errors.New(`"message" must be at most 4096 bytes`)
	}
	return nil
}

// Work fails with the payload's message; with "times" it fails only the
// first that many attempts and then succeeds.
func (failHandler) Work(_ context.Context, job *jobs.Job) (any, error) {
	var p failPayload
	_ = jsonutil.DecodeStrict(job.Payload, &p)
	if p.Times != nil && job.Attempt > *p.Times {
		return map[string]any{"succeeded_on_attempt": job.Attempt}, nil
	}
	msg := p.Message
	if msg == "" {
		msg = "fail job failed as asked"
	}
	return nil, errors.New(msg)
}
