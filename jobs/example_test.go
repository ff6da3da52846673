package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/flinthq/flint/jobs"
)

// ThumbnailArgs is the payload of the thumbnail jobs of the examples.
type ThumbnailArgs struct {
	URL  string `json:"url"`
	Size int    `json:"size"`
}

// Validate refuses, at enqueue, sizes no attempt could make.
func (a ThumbnailArgs) Validate() error {
	if a.Size < 16 || a.Size > 1024 {
		return errors.New("size must be between 16 and 1024")
	}
	return nil
}

// A typed handler decodes the payload into a struct before it runs, and
// checks payloads before any job exists: the API and app.Client call
// ValidatePayload at enqueue. The handler is a plain function, so a test
// can call Work with a Job of its own.
func ExampleTyped() {
	h := jobs.Typed(func(ctx context.Context, job *jobs.Job, args ThumbnailArgs) (any, error) {
		return map[string]int{"size": args.Size}, nil
	})

	check := h.(jobs.PayloadValidator)
	fmt.Println(check.ValidatePayload(json.RawMessage(`{"url": "https://example.com/a.png", "size": 128}`)))
	fmt.Println(check.ValidatePayload(json.RawMessage(`{"url": "https://example.com/a.png", "size": 4}`)))
	fmt.Println(check.ValidatePayload(json.RawMessage(`{"url": "https://example.com/a.png", "szie": 128}`)))

	result, err := h.Work(context.Background(), &jobs.Job{Type: "thumbnail", Payload: json.RawMessage(`{"size": 64}`)})
	fmt.Println(result, err)
	// Output:
	// <nil>
	// size must be between 16 and 1024
	// unknown field "szie"
	// map[size:64] <nil>
}

// A handler returns jobs.Permanent for a failure no retry can fix: the job
// goes to the dead-letter queue at once, with the reason, instead of using
// up its retries. Any other error is retried with backoff.
func ExamplePermanent() {
	h := jobs.HandlerFunc(func(ctx context.Context, job *jobs.Job) (any, error) {
		var args struct {
			Email string `json:"email"`
		}
		if err := json.Unmarshal(job.Payload, &args); err != nil || args.Email == "" {
			return nil, jobs.Permanent(errors.New("the payload names no email address"))
		}
		// ... send; a refused connection is returned as it is, and retried ...
		return nil, nil
	})

	_, err := h.Work(context.Background(), &jobs.Job{Payload: json.RawMessage(`{}`)})
	fmt.Println(err, jobs.IsPermanent(err))
	// Output: permanent failure: the payload names no email address true
}
