package handlers

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"
)

type ctxKey struct{}

// TestRequestContextOutlivesShutdown: a request under way when the server's
// base context is cancelled (the process got SIGTERM) keeps a live context,
// with the base context's values and the request timeout, so that it ends
// as it would have, not with "context canceled".
func TestRequestContextOutlivesShutdown(t *testing.T) {
	t.Parallel()
	base, stop := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "base"))
	app := fiber.New()
	app.Use(requestContext(base, 5*time.Second))
	var (
		errAfterStop error
		value        any
		deadline     time.Time
		hasDeadline  bool
	)
	app.Get("/", func(c *fiber.Ctx) error {
		stop() // the shutdown begins while the request runs
		ctx := c.UserContext()
		errAfterStop = ctx.Err()
		value = ctx.Value(ctxKey{})
		deadline, hasDeadline = ctx.Deadline()
		return c.SendStatus(fiber.StatusOK)
	})
	resp, err := app.Test(httptest.NewRequest("GET", "/", nil), -1)
	require.NoError(t, err)
	require.Equal(t, fiber.StatusOK, resp.StatusCode)
	require.NoError(t, errAfterStop, "the request's context ended with the base context")
	require.Equal(t, "base", value, "the request's context carries the base context's values")
	require.True(t, hasDeadline, "the request's context has the request timeout")
	require.WithinDuration(t, time.Now().Add(5*time.Second), deadline, 5*time.Second)
}
