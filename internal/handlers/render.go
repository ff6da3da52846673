package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
)

// render writes a templ component as the response with the given status.
// It renders into a buffer first, so a render error can still become a 500.
func render(c *fiber.Ctx, status int, comp templ.Component) error {
	var buf bytes.Buffer
	if err := comp.Render(c.UserContext(), &buf); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Vary("HX-Request")
	return c.Status(status).Send(buf.Bytes())
}

// isHX reports whether the request came from HTMX.
func isHX(c *fiber.Ctx) bool { return c.Get("HX-Request") == "true" }

// toastKind says how a toast looks: a confirmation or a refusal.
type toastKind string

const (
	toastOK  toastKind = "ok"
	toastBad toastKind = "bad"
)

// toast asks the page to show a short message (static/dashboard.js listens for it).
func toast(c *fiber.Ctx, message string, kind toastKind) {
	b, _ := json.Marshal(map[string]map[string]string{"flint:toast": {"message": message, "kind": string(kind)}})
	c.Set("HX-Trigger", string(b))
}

// securityHeaders sets the Content-Security-Policy and friends on every
// dashboard response. Pages load scripts and styles from /static only,
// never inline, and cannot be framed.
func securityHeaders(secure bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		c.Set("X-Content-Type-Options", "nosniff")
		c.Set("Referrer-Policy", "same-origin")
		c.Set("X-Frame-Options", "DENY")
		c.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		// Nothing of the dashboard is cached, and no page is kept in the
		// back/forward cache with its live stream open.
		c.Set(fiber.HeaderCacheControl, "no-store")
		if secure {
			c.Set("Strict-Transport-Security", "max-age=31536000")
		}
		return c.Next()
	}
}

// redirectHX sends the browser elsewhere: HX-Redirect for HTMX requests, a
// 303 otherwise.
func redirectHX(c *fiber.Ctx, to string) error {
	if isHX(c) {
		c.Set("HX-Redirect", to)
		return c.SendStatus(http.StatusNoContent)
	}
	return c.Redirect(to, http.StatusSeeOther)
}
