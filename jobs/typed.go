package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/flinthq/flint/internal/jsonutil"
)

// ArgsValidator is implemented by the argument types of typed handlers
// that check their own values (a range, a required field, a URL). Typed
// calls Validate at enqueue, so a bad value is refused with a 422 naming
// the payload instead of becoming a job that fails at run time.
type ArgsValidator interface {
	// Validate returns an error saying what is wrong with the values.
	Validate() error
}

// Typed returns a Handler whose payload is decoded into a T before fn
// runs. At enqueue it refuses, with a 422 on the payload field, a payload
// that does not decode into T (unknown fields included, so a typo is
// caught) and, when T (or *T) implements ArgsValidator, one whose Validate
// fails:
//
//	type ResizeArgs struct {
//		URL   string `json:"url"`
//		Width int    `json:"width"`
//	}
//
//	func (a ResizeArgs) Validate() error {
//		if a.Width < 1 || a.Width > 4096 {
//			return errors.New("width must be between 1 and 4096")
//		}
//		return nil
//	}
//
//	a.Handle("resize_image", jobs.Typed(func(ctx context.Context, job *jobs.Job, args ResizeArgs) (any, error) {
//		return map[string]int{"width": args.Width}, nil
//	}))
//
// A job that reaches the handler with a payload that no longer decodes
// (enqueued before the type changed) fails for good: retrying cannot fix
// it.
func Typed[T any](fn func(ctx context.Context, job *Job, args T) (any, error)) Handler {
	return typedHandler[T]{fn: fn}
}

type typedHandler[T any] struct {
	fn func(ctx context.Context, job *Job, args T) (any, error)
}

// decode reads payload into a T, strictly, and lets T check its values.
func (h typedHandler[T]) decode(payload json.RawMessage) (T, error) {
	var args T
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	if err := jsonutil.DecodeStrict(payload, &args); err != nil {
		return args, err
	}
	var v any = args
	if _, ok := v.(ArgsValidator); !ok {
		v = &args
	}
	if av, ok := v.(ArgsValidator); ok {
		if err := av.Validate(); err != nil {
			return args, err
		}
	}
	return args, nil
}

// ValidatePayload implements PayloadValidator.
func (h typedHandler[T]) ValidatePayload(payload json.RawMessage) error {
	_, err := h.decode(payload)
	return err
}

// Work implements Handler.
func (h typedHandler[T]) Work(ctx context.Context, job *Job) (any, error) {
	args, err := h.decode(job.Payload)
	if err != nil {
		return nil, Permanent(fmt.Errorf("payload does not fit %T: %w", args, err))
	}
	return h.fn(ctx, job, args)
}
