package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
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

// apiKeyAuth checks X-API-Key in constant time. Comparing SHA-256 digests
// keeps the comparison fixed-length, since ConstantTimeCompare returns early
// on a length mismatch.
func apiKeyAuth(key string) fiber.Handler {
	want := sha256.Sum256([]byte(key))
	return func(c *fiber.Ctx) error {
		got := sha256.Sum256([]byte(c.Get("X-API-Key")))
		if key == "" || subtle.ConstantTimeCompare(want[:], got[:]) != 1 {
			c.Set("WWW-Authenticate", `APIKey header="X-API-Key"`)
			return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
				Message: "missing or wrong X-API-Key header"}
		}
		return c.Next()
	}
}
