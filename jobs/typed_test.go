package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

type resizeArgs struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (a resizeArgs) Validate() error {
	if a.Width < 1 || a.Width > 4096 {
		return errors.New("width must be between 1 and 4096")
	}
	return nil
}

type pointerArgs struct {
	Name string `json:"name"`
}

func (a *pointerArgs) Validate() error {
	if a.Name == "" {
		return errors.New("name is required")
	}
	return nil
}

// TestTypedHandler: the payload reaches the function decoded; at enqueue
// unknown fields, wrong kinds and values Validate refuses are 422s on the
// payload (whether Validate has a value or a pointer receiver); a payload
// that no longer fits at run time fails for good.
func TestTypedHandler(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	var got resizeArgs
	reg.Register("resize", jobs.Typed(func(_ context.Context, _ *jobs.Job, a resizeArgs) (any, error) {
		got = a
		return map[string]int{"width": a.Width}, nil
	}))
	reg.Register("greet", jobs.Typed(func(_ context.Context, _ *jobs.Job, a pointerArgs) (any, error) { return a.Name, nil }))

	for payload, want := range map[string]string{
		`{"url": "x", "width": 0}`:     "width must be between 1 and 4096",
		`{"url": "x", "widht": 10}`:    `unknown field "widht"`,
		`{"url": "x", "width": "ten"}`: `"width" must be an integer`,
	} {
		p := jobs.EnqueueParams{Type: "resize", Payload: json.RawMessage(payload)}
		err := p.Validate(reg, time.Now())
		var ve *jobs.ValidationError
		require.ErrorAs(t, err, &ve, payload)
		require.Equal(t, "payload", ve.Field)
		require.Contains(t, ve.Message, want, payload)
	}
	p := jobs.EnqueueParams{Type: "greet", Payload: json.RawMessage(`{}`)}
	require.ErrorContains(t, p.Validate(reg, time.Now()), "name is required", "a pointer receiver's Validate runs too")
	p = jobs.EnqueueParams{Type: "resize", Payload: json.RawMessage(`{"url": "https://x", "width": 640}`)}
	require.NoError(t, p.Validate(reg, time.Now()))

	h, _ := reg.Lookup("resize")
	res, err := h.Work(context.Background(), &jobs.Job{Payload: p.Payload})
	require.NoError(t, err)
	require.Equal(t, resizeArgs{URL: "https://x", Width: 640}, got)
	require.Equal(t, map[string]int{"width": 640}, res)

	_, err = h.Work(context.Background(), &jobs.Job{Payload: json.RawMessage(`{"width": 640, "height": 2}`)})
	require.True(t, jobs.IsPermanent(err), "a payload that no longer fits cannot succeed on retry: %v", err)
}
