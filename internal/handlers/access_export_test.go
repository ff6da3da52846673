package handlers

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/jobs"
)

// Tests see batched key uses written within moments, and open streams
// re-check their access ten times a second.
func init() {
	keyUseFlush = 50 * time.Millisecond
	streamRecheck = 100 * time.Millisecond
}

// AccessNeed is what accessTable says the route needs (the scope, and the
// scope a field's values raise it to); ok is false for an unlisted route.
func AccessNeed(method, path string) (need auth.Scope, field string, raise map[string]auth.Scope, ok bool) {
	r, ok := accessTable[routeKey(method, path)]
	return r.need, r.field, r.raise, ok
}

// IsPublicRoute reports whether the route needs no credentials.
func IsPublicRoute(method, path string) bool { return publicRoutes[routeKey(method, path)] }

// AccessTableKeys lists accessTable's routes.
func AccessTableKeys() []string {
	keys := make([]string, 0, len(accessTable))
	for k := range accessTable {
		keys = append(keys, k)
	}
	return keys
}

// TestUnlistedRouteIsRefused: a route registered behind the check but
// missing from accessTable is refused even to the bootstrap admin key.
func TestUnlistedRouteIsRefused(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &server{logger: logger, clock: jobs.SystemClock{}}
	app := fiber.New(fiber.Config{ErrorHandler: ErrorHandler(logger)})
	asAdmin := func(c *fiber.Ctx) error {
		c.Locals(principalKey, principal{actor: auth.BootstrapActor, source: "api", scopes: []auth.Scope{auth.ScopeAdmin}})
		return c.Next()
	}
	api := guarded{Router: app.Group("/api/v1", asAdmin), check: s.authorize}
	ok := func(c *fiber.Ctx) error { return c.SendString("ran") }
	api.Get("/jobs", ok)
	api.Post("/not-in-the-table", ok)
	api.Group("/nested").Get("/also-not", ok)

	status := func(method, path string) (int, string) {
		resp, err := app.Test(httptest.NewRequest(method, path, nil))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := status("GET", "/api/v1/jobs")
	require.Equal(t, 200, code, body)
	for _, p := range []string{"/api/v1/not-in-the-table", "/api/v1/nested/also-not"} {
		method := "POST"
		if p == "/api/v1/nested/also-not" {
			method = "GET"
		}
		code, body = status(method, p)
		require.Equal(t, 403, code, p)
		require.Contains(t, body, "no access rule", p)
		require.NotContains(t, body, "ran")
	}
}

// TestKeyUseNotesAtMostOncePerInterval: a key whose stored last use is
// recent is not noted again; one this process wrote recently is not either.
func TestKeyUseNotesAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	u := newKeyUsage()
	now := time.Now()
	recent := now.Add(-10 * time.Second)
	k := auth.APIKey{Name: "a", LastUsedAt: &recent}
	u.note(k, now)
	require.Nil(t, u.take(), "stored use is recent")
	k.LastUsedAt = nil
	u.note(k, now)
	u.note(k, now.Add(time.Second))
	got := u.take()
	require.Len(t, got, 1)
	u.note(k, now.Add(30*time.Second))
	require.Nil(t, u.take(), "this process wrote it 30 s ago")
	u.note(k, now.Add(61*time.Second))
	require.Len(t, u.take(), 1)
}
