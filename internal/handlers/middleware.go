package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gofiber/fiber/v2"
)

const requestIDKey = "request_id"

// requestContext gives each request a context with a timeout, and a
// request id for the logs. The context carries the server's base context's
// values but not its cancellation: a request in flight when the process is
// told to stop (SIGTERM cancels the base context) runs to its end within
// the shutdown's grace period, instead of failing half-way with "context
// canceled" and a 500. Event streams and long polls watch the base context
// themselves and end at once.
func requestContext(base context.Context, timeout time.Duration) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := c.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Locals(requestIDKey, id)
		c.Set("X-Request-Id", id)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(base), timeout)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
}
