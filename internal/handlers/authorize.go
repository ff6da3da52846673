package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
)

// principal is who makes a request: a signed-in person or an API key.
type principal struct {
	actor  string // for the audit trail: an email, or key:<name>
	source string // "dashboard" or "api"
	scopes []auth.Scope
	role   auth.Role // people only
	keyID  uuid.UUID // keys only; zero for the bootstrap key
	// queues limits a key's work scope to these queues; nil: every queue.
	queues []string
	// keyHash is the hash of the secret a stored key was presented with,
	// to look the key up again (open streams); "" for people and the
	// bootstrap key.
	keyHash string
}

const principalKey = "principal"

// principalOf returns who makes this request; ok is false before
// authentication.
func principalOf(c *fiber.Ctx) (principal, bool) {
	if p, ok := c.Locals(principalKey).(principal); ok {
		return p, true
	}
	if u, ok := c.Locals(userKey).(auth.User); ok {
		return principal{actor: u.Email, source: "dashboard", scopes: u.Role.Scopes(), role: u.Role}, true
	}
	return principal{}, false
}

// forbidden is the API's refusal: 403 naming the scope that is missing.
func forbidden(p principal, route string, need auth.Scope) *apiError {
	have := make([]string, len(p.scopes))
	for i, s := range p.scopes {
		have[i] = string(s)
	}
	return &apiError{Status: http.StatusForbidden, Code: "forbidden", Scope: string(need),
		Message: fmt.Sprintf("%s needs the %q scope; this key has %s", route, need, strings.Join(have, ", "))}
}

// authorize is the first handler of every guarded route: it looks the
// matched route up in accessTable and refuses what the caller's scopes do
// not grant. It also hands the templates what the caller may use (the
// same table, through viewAccess), so pages show only those controls.
func (s *server) authorize(c *fiber.Ctx) error {
	rt := c.Route()
	key := routeKey(rt.Method, rt.Path)
	p, ok := principalOf(c)
	if !ok {
		return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "sign in or send an X-API-Key header"}
	}
	r, listed := accessTable[key]
	if !listed {
		s.logger.ErrorContext(c.UserContext(), "route has no access rule; refused", "component", "http", "route", key)
		return s.refuse(c, p, key, auth.ScopeAdmin, "this route has no access rule, so it is refused to everybody")
	}
	need := r.needOf(c)
	if !auth.Grants(p.scopes, need) {
		return s.refuse(c, p, key, need, "")
	}
	c.SetUserContext(views.WithAccess(c.UserContext(), viewAccess{p.scopes}))
	return c.Next()
}

// streamCheck asks again, for an open event stream, whether whoever
// opened it may still read it. It returns why not ("" while they may), or
// an error when it cannot tell now (the stream then waits for the next
// check rather than ending on a passing database error).
type streamCheck func(ctx context.Context) (ended string, err error)

// recheck returns the check that the event streams of request c repeat
// every streamRecheck, so that a stream does not outlive what let it
// open: a person's session is looked up again (one primary-key read,
// joined with the user: disabling deletes the sessions, and the role is
// the current one), a key by the hash of the secret it was opened with
// (one unique-index read, which finds nothing once the key is revoked or
// the secret rotated out). The bootstrap key cannot be revoked while the
// process runs: it gets no check (nil).
func (s *server) recheck(c *fiber.Ctx) streamCheck {
	rt := c.Route()
	need := accessTable[routeKey(rt.Method, rt.Path)].needOf(c)
	p, _ := principalOf(c)
	switch {
	case p.keyHash != "" && s.access != nil:
		hash := p.keyHash
		return func(ctx context.Context) (string, error) {
			k, err := s.access.LookupAPIKey(ctx, hash)
			switch {
			case errors.Is(err, domain.ErrNotFound):
				return "this key was revoked, or the secret it was opened with was rotated out", nil
			case err != nil:
				return "", err
			case !auth.Grants(k.Scopes, need):
				return fmt.Sprintf("this key no longer has the %q scope", need), nil
			}
			return "", nil
		}
	case p.source == "dashboard" && s.sessions != nil:
		tok, _ := c.Locals(tokKey).(string)
		return func(ctx context.Context) (string, error) {
			sess, err := s.sessions.db.GetSession(ctx, tok)
			switch {
			case errors.Is(err, domain.ErrNotFound):
				return "the session ended: signed out, expired, or the account was disabled", nil
			case err != nil:
				return "", err
			case !auth.Grants(sess.User.Role.Scopes(), need):
				return fmt.Sprintf("your role (%s) no longer allows this", sess.User.Role), nil
			}
			return "", nil
		}
	}
	return nil
}

// viewAccess answers the templates' questions (views.Access) from
// accessTable, for a caller holding scopes: a page shows a control exactly
// when the route it leads to would let the caller in.
type viewAccess struct{ scopes []auth.Scope }

// Can reports whether the caller may use route (an accessTable key) with
// value in the field that raises the route's need.
func (a viewAccess) Can(route, value string) bool {
	r, ok := accessTable[route]
	return ok && auth.Grants(a.scopes, r.needFor(value))
}

// Needs names the least role that may use route.
func (a viewAccess) Needs(route string) auth.Role {
	r, ok := accessTable[route]
	if !ok {
		return auth.RoleAdmin
	}
	return auth.LeastRole(r.need)
}

// refuse answers a refused request: JSON on the API, a toast for an HTMX
// request and an error page for a page load on the dashboard.
func (s *server) refuse(c *fiber.Ctx, p principal, route string, need auth.Scope, why string) error {
	if p.source == "api" {
		e := forbidden(p, route, need)
		if why != "" {
			e.Message = why
		}
		return e
	}
	role := auth.LeastRole(need)
	msg := fmt.Sprintf("Your role (%s) cannot do this; it needs %s.", p.role, role)
	if why != "" {
		msg = "Refused: " + why + "."
	}
	if isHX(c) {
		toast(c, msg, toastBad)
		return c.Status(http.StatusForbidden).SendString(msg)
	}
	c.SetUserContext(views.WithAccess(c.UserContext(), viewAccess{p.scopes}))
	return render(c, http.StatusForbidden, views.ErrorPage(s.chrome(c, "Not allowed", "", false), "Not allowed", msg))
}
