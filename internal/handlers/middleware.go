package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gofiber/fiber/v2"
)

const requestIDKey = "request_id"

// requestContext gives each request a context derived from the server's
// base context with a timeout, and a request id for the logs.
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
		ctx, cancel := context.WithTimeout(base, timeout)
		defer cancel()
		c.SetUserContext(ctx)
		return c.Next()
	}
}
