package domain_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestCatalogAcceptsServedAndConfiguredTypes: a type is accepted when it
// has a handler here, is configured, or is served elsewhere; an unknown
// type makes the catalog reload what is served (at most once a second),
// and the refusal lists every known type.
func TestCatalogAcceptsServedAndConfiguredTypes(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	var served atomic.Pointer[[]string]
	served.Store(&[]string{"py.resize"})
	var loads atomic.Int32
	c := domain.NewCatalog(reg, []string{"later.type", "later.type"}, func(context.Context) ([]string, error) {
		loads.Add(1)
		return *served.Load(), nil
	})
	ctx := context.Background()

	p := jobs.EnqueueParams{Type: "py.resize"}
	c.Prepare(ctx, p.Type, "")
	require.NoError(t, p.Validate(c, time.Now()), "served by a worker")
	p = jobs.EnqueueParams{Type: "later.type"}
	require.NoError(t, p.Validate(c, time.Now()), "configured")
	p = jobs.EnqueueParams{Type: jobs.TypeNoop}
	require.NoError(t, p.Validate(c, time.Now()), "registered here")

	// A worker of a new type registers: the next request naming it reloads.
	served.Store(&[]string{"py.resize", "rb.mail"})
	c.Reload(ctx, 0)
	p = jobs.EnqueueParams{Type: "rb.mail"}
	require.NoError(t, p.Validate(c, time.Now()))

	// An unknown type reloads at most once a second, and is refused with
	// the known types listed.
	before := loads.Load()
	for range 5 {
		c.Prepare(ctx, "nope", "")
	}
	require.LessOrEqual(t, loads.Load()-before, int32(1), "reloads are rate limited")
	p = jobs.EnqueueParams{Type: "nope"}
	err := p.Validate(c, time.Now())
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "type", ve.Field)
	require.Contains(t, ve.Message, "did you mean noop?", "a few types like it, not the whole list")
	require.Contains(t, ve.Message, "7 types are known")
	require.Equal(t, []string{"fail", "http_request", "later.type", "noop", "py.resize", "rb.mail", "sleep"}, c.Known())

	// Payloads of registered typed handlers are checked at enqueue.
	reg.Register("typed", jobs.Typed(func(context.Context, *jobs.Job, struct {
		N int `json:"n"`
	}) (any, error) {
		return nil, nil
	}))
	p = jobs.EnqueueParams{Type: "typed", Payload: []byte(`{"m": 1}`)}
	require.ErrorAs(t, p.Validate(c, time.Now()), &ve)
	require.Equal(t, "payload", ve.Field)
	require.Contains(t, ve.Message, `unknown field "m"`)
}
