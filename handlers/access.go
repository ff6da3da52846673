package handlers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/auth"
	"flint/jobs"
	"flint/views"
)

// Access control. Every route is either public or has an entry in
// accessTable, naming the one scope it needs ("METHOD /path", the path as
// registered, with :params). People get the scopes of their role, API keys
// the scopes they were created with (auth.Grants says what implies what).
// A route that is in neither table is refused to everybody: forgetting an
// entry fails closed, and TestEveryRouteHasAnAccessRule fails with the
// route's name.
//
// Adding a route: add its line below in the same commit. GETs that only
// read need needRead (viewer); operational actions needOperate (operator);
// settings-like changes, people, keys and purging needAdmin. An API route's
// operation in openapi.json says the same scope in "x-flint-scope" and
// documents a 403 (TestOpenAPINamesEachScope).

// rule is what a route needs: a scope, raised to another when a form or
// query field (field) has one of the values in raise (bulk purge, DELETE
// with purge=true).
type rule struct {
	need  auth.Scope
	field string
	raise map[string]auth.Scope
}

var (
	needEnqueue = rule{need: auth.ScopeEnqueue}
	needRead    = rule{need: auth.ScopeRead}
	needOperate = rule{need: auth.ScopeOperate}
	needAdmin   = rule{need: auth.ScopeAdmin}
)

// raisedBy returns r needing scope when field has one of values.
func (r rule) raisedBy(field string, scope auth.Scope, values ...string) rule {
	r.field = field
	r.raise = map[string]auth.Scope{}
	for _, v := range values {
		r.raise[v] = scope
	}
	return r
}

// needFor is the scope the rule needs when its field has value v.
func (r rule) needFor(v string) auth.Scope {
	if raised, ok := r.raise[v]; ok && r.field != "" {
		return raised
	}
	return r.need
}

// needOf is the scope the rule needs for request c: its field is read
// from the query, or from the form of a request that is not a GET.
func (r rule) needOf(c *fiber.Ctx) auth.Scope {
	if r.field == "" {
		return r.need
	}
	v := c.Query(r.field)
	if v == "" && c.Method() != fiber.MethodGet {
		v = c.FormValue(r.field)
	}
	return r.needFor(v)
}

// publicRoutes need no credentials at all.
var publicRoutes = map[string]bool{
	"GET /healthz":             true,
	"GET /readyz":              true,
	"GET /metrics":             true, // its own bearer token (FLINT_METRICS_TOKEN)
	"GET /api/v1/docs":         true,
	"GET /api/v1/openapi.json": true,
	"GET /favicon.ico":         true,
	"GET /login":               true,
	"POST /login":              true,
}

// accessTable is the one place that says who may use which route.
var accessTable = map[string]rule{
	// The JSON API, for keys.
	"POST /api/v1/jobs":                  needEnqueue,
	"POST /api/v1/jobs/batch":            needEnqueue,
	"POST /api/v1/workflows":             needEnqueue,
	"GET /api/v1/jobs":                   needRead,
	"GET /api/v1/jobs/:id":               needRead,
	"GET /api/v1/jobs/:id/explain":       needRead,
	"GET /api/v1/jobs/:id/logs":          needRead,
	"POST /api/v1/jobs/:id/replay":       needOperate,
	"POST /api/v1/jobs/:id/cancel":       needOperate,
	"POST /api/v1/jobs/:id/retry":        needOperate,
	"POST /api/v1/jobs/:id/restore":      needOperate,
	"DELETE /api/v1/jobs/:id":            needOperate.raisedBy("purge", auth.ScopeAdmin, "true", "1"),
	"GET /api/v1/dlq":                    needRead,
	"POST /api/v1/dlq/retry":             needOperate,
	"GET /api/v1/bin":                    needRead,
	"GET /api/v1/stats":                  needRead,
	"GET /api/v1/workers":                needRead,
	"POST /api/v1/benchmark/run":         needAdmin, // loads the machine
	"GET /api/v1/logs":                   needRead,
	"GET /api/v1/audit":                  needRead,
	"GET /api/v1/sse/events":             needRead,
	"GET /api/v1/recurring":              needRead,
	"GET /api/v1/recurring/:id":          needRead,
	"POST /api/v1/recurring/:id/pause":   needOperate,
	"POST /api/v1/recurring/:id/resume":  needOperate,
	"POST /api/v1/recurring/:id/run":     needOperate,
	"DELETE /api/v1/recurring/:id":       needAdmin,
	"GET /api/v1/queues":                 needRead,
	"GET /api/v1/queues/:name":           needRead,
	"POST /api/v1/queues/:name/pause":    needOperate,
	"POST /api/v1/queues/:name/resume":   needOperate,
	"PATCH /api/v1/queues/:name":         needAdmin,
	"GET /api/v1/settings":               needRead,
	"PATCH /api/v1/settings":             needAdmin,
	"GET /api/v1/settings/changes":       needRead,
	"GET /api/v1/alerts":                 needRead,
	"GET /api/v1/alerts/deliveries":      needRead,
	"GET /api/v1/alerts/rules":           needRead,
	"POST /api/v1/alerts/rules":          needAdmin,
	"GET /api/v1/alerts/rules/:id":       needRead,
	"PATCH /api/v1/alerts/rules/:id":     needAdmin,
	"DELETE /api/v1/alerts/rules/:id":    needAdmin,
	"POST /api/v1/alerts/rules/:id/test": needOperate,
	"GET /api/v1/keys":                   needAdmin,
	"POST /api/v1/keys":                  needAdmin,
	"DELETE /api/v1/keys/:id":            needAdmin,
	"POST /api/v1/keys/:id/rotate":       needAdmin,

	// The dashboard, for people.
	"POST /logout":                  needRead,
	"GET /":                         needRead,
	"GET /overview/live":            needRead,
	"GET /jobs":                     needRead,
	"GET /jobs/rows":                needRead,
	"POST /jobs/bulk":               needOperate.raisedBy("action", auth.ScopeAdmin, string(jobPurge)),
	"GET /jobs/new":                 needEnqueue,
	"POST /jobs/new":                needEnqueue,
	"GET /jobs/:id":                 needRead,
	"GET /jobs/:id/live":            needRead,
	"GET /jobs/:id/log":             needRead,
	"GET /jobs/:id/edit":            needOperate,
	"POST /jobs/:id/edit":           needOperate,
	"POST /jobs/:id/retry":          needOperate,
	"POST /jobs/:id/cancel":         needOperate,
	"POST /jobs/:id/delete":         needOperate,
	"POST /jobs/:id/restore":        needOperate,
	"POST /jobs/:id/purge":          needAdmin,
	"GET /dlq":                      needRead,
	"POST /dlq/bulk":                needOperate.raisedBy("action", auth.ScopeAdmin, string(jobPurge)),
	"POST /dlq/replay-all":          needOperate,
	"GET /bin":                      needRead,
	"POST /bin/bulk":                needOperate.raisedBy("action", auth.ScopeAdmin, string(jobPurge)),
	"GET /recurring":                needRead,
	"POST /recurring/:id/pause":     needOperate,
	"POST /recurring/:id/resume":    needOperate,
	"POST /recurring/:id/run":       needOperate,
	"POST /recurring/:id/delete":    needAdmin,
	"GET /workers":                  needRead,
	"GET /queues":                   needRead,
	"POST /queues/:name/pause":      needOperate,
	"POST /queues/:name/resume":     needOperate,
	"POST /queues/:name/limits":     needAdmin,
	"GET /settings":                 needRead,
	"GET /alerts":                   needRead,
	"GET /alerts/rules/new":         needAdmin,
	"POST /alerts/rules":            needAdmin,
	"GET /alerts/rules/:id":         needRead,
	"POST /alerts/rules/:id":        needAdmin,
	"POST /alerts/rules/:id/delete": needAdmin,
	"POST /alerts/rules/:id/test":   needOperate,
	"POST /settings":                needAdmin,
	"GET /benchmark":                needRead,
	"POST /benchmark":               needAdmin,
	"GET /events":                   needRead,
	"GET /audit":                    needRead,
	"GET /logs":                     needRead,
	"GET /logs/tail":                needRead,
	"GET /account":                  needRead, // one's own password
	"POST /account/password":        needRead,
	"GET /users":                    needAdmin,
	"POST /users":                   needAdmin,
	"POST /users/:id/role":          needAdmin,
	"POST /users/:id/disable":       needAdmin,
	"POST /users/:id/enable":        needAdmin,
	"POST /users/:id/remove":        needAdmin,
	"GET /keys":                     needAdmin,
	"POST /keys":                    needAdmin,
	"POST /keys/:id/revoke":         needAdmin,
	"POST /keys/:id/rotate":         needAdmin,
}

// routeKey names a route in the tables: HEAD is GET without a body.
func routeKey(method, path string) string {
	if method == fiber.MethodHead {
		method = fiber.MethodGet
	}
	return method + " " + path
}

// principal is who makes a request: a signed-in person or an API key.
type principal struct {
	actor  string // for the audit trail: an email, or key:<name>
	source string // "dashboard" or "api"
	scopes []auth.Scope
	role   auth.Role // people only
	keyID  uuid.UUID // keys only; zero for the bootstrap key
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
			case errors.Is(err, jobs.ErrNotFound):
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
			case errors.Is(err, jobs.ErrNotFound):
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

// guarded is a router whose every route runs authorize first. The API
// group and the dashboard register through one, so a route added there
// cannot skip the check; a route missing from accessTable is refused.
type guarded struct {
	fiber.Router
	check fiber.Handler
}

func (g guarded) with(h []fiber.Handler) []fiber.Handler {
	return append([]fiber.Handler{g.check}, h...)
}

// Get registers a GET (and HEAD) route behind the check.
func (g guarded) Get(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Get(path, g.with(h)...)
	return g
}

// Head registers a HEAD route behind the check.
func (g guarded) Head(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Head(path, g.with(h)...)
	return g
}

// Post registers a POST route behind the check.
func (g guarded) Post(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Post(path, g.with(h)...)
	return g
}

// Put registers a PUT route behind the check.
func (g guarded) Put(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Put(path, g.with(h)...)
	return g
}

// Patch registers a PATCH route behind the check.
func (g guarded) Patch(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Patch(path, g.with(h)...)
	return g
}

// Delete registers a DELETE route behind the check.
func (g guarded) Delete(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Delete(path, g.with(h)...)
	return g
}

// Add registers a route of any method behind the check.
func (g guarded) Add(method, path string, h ...fiber.Handler) fiber.Router {
	g.Router.Add(method, path, g.with(h)...)
	return g
}

// All registers a route for every method behind the check.
func (g guarded) All(path string, h ...fiber.Handler) fiber.Router {
	g.Router.All(path, g.with(h)...)
	return g
}

// Group returns a sub-router that is guarded too.
func (g guarded) Group(prefix string, h ...fiber.Handler) fiber.Router {
	return guarded{Router: g.Router.Group(prefix, h...), check: g.check}
}

// AccessStore is what people and API keys need from storage; *db.Store
// implements it.
type AccessStore interface {
	LookupAPIKey(ctx context.Context, hash string) (auth.APIKey, error)
	TouchAPIKeys(ctx context.Context, used map[uuid.UUID]time.Time) error
	CreateAPIKey(ctx context.Context, name string, scopes []auth.Scope, createdBy string) (auth.APIKey, string, error)
	ListAPIKeys(ctx context.Context) ([]auth.APIKey, error)
	RevokeAPIKey(ctx context.Context, id uuid.UUID) (auth.APIKey, error)
	RotateAPIKey(ctx context.Context, id uuid.UUID, window time.Duration) (auth.APIKey, string, error)
	ListUsers(ctx context.Context) ([]auth.User, error)
	UserByID(ctx context.Context, id uuid.UUID) (auth.User, error)
	AddUser(ctx context.Context, email, password string, role auth.Role) (auth.User, error)
	SetUserRole(ctx context.Context, id uuid.UUID, role auth.Role) (auth.User, error)
	DisableUser(ctx context.Context, id uuid.UUID) (auth.User, error)
	EnableUser(ctx context.Context, id uuid.UUID) (auth.User, error)
	RemoveUser(ctx context.Context, id uuid.UUID) (auth.User, error)
	ChangePassword(ctx context.Context, id uuid.UUID, current, next, keepToken string) error
}

// authenticateKey identifies the caller of /api/v1 from X-API-Key: the
// bootstrap key (FLINT_API_KEY, admin, compared in constant time over
// SHA-256 digests so that lengths do not leak) or a stored key, looked up
// by the hash of the secret on every request, so that a revoked key is
// refused from the very next request on, in every process.
func (s *server) authenticateKey(bootstrap string) fiber.Handler {
	want := sha256.Sum256([]byte(bootstrap))
	return func(c *fiber.Ctx) error {
		secret := c.Get("X-API-Key")
		got := sha256.Sum256([]byte(secret))
		if bootstrap != "" && subtle.ConstantTimeCompare(want[:], got[:]) == 1 {
			c.Locals(principalKey, principal{actor: auth.BootstrapActor, source: "api", scopes: []auth.Scope{auth.ScopeAdmin}})
			return c.Next()
		}
		if secret != "" && s.access != nil && strings.HasPrefix(secret, auth.KeySecretPrefix) {
			hash := auth.HashToken(secret)
			k, err := s.access.LookupAPIKey(c.UserContext(), hash)
			if err == nil {
				s.keyUse.note(k, s.clock.Now())
				c.Locals(principalKey, principal{actor: k.Actor(), source: "api", scopes: k.Scopes, keyID: k.ID, keyHash: hash})
				return c.Next()
			}
			if !errors.Is(err, jobs.ErrNotFound) {
				return err
			}
		}
		c.Set("WWW-Authenticate", `APIKey header="X-API-Key"`)
		return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: "missing, wrong, revoked or expired X-API-Key header"}
	}
}

// keyUseEvery is how stale a key's stored last-used time may get before a
// request notes a new one: a key in constant use is written at most about
// once a minute per process, and never on the request path.
const keyUseEvery = time.Minute

// keyUseFlush is how often noted uses are written, in one statement.
var keyUseFlush = 10 * time.Second

// keyUsage collects when keys were used, for a periodic batched write.
type keyUsage struct {
	mu      sync.Mutex
	pending map[uuid.UUID]time.Time
	written map[uuid.UUID]time.Time // what this process last wrote
}

func newKeyUsage() *keyUsage {
	return &keyUsage{pending: map[uuid.UUID]time.Time{}, written: map[uuid.UUID]time.Time{}}
}

// note records a use unless the stored time, or the one this process
// last wrote, is recent enough.
func (u *keyUsage) note(k auth.APIKey, now time.Time) {
	if k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) < keyUseEvery {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if w, ok := u.written[k.ID]; ok && now.Sub(w) < keyUseEvery {
		return
	}
	u.pending[k.ID] = now
}

// take returns the noted uses and starts a new batch.
func (u *keyUsage) take() map[uuid.UUID]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.pending) == 0 {
		return nil
	}
	p := u.pending
	u.pending = map[uuid.UUID]time.Time{}
	if len(u.written) > 10_000 {
		u.written = map[uuid.UUID]time.Time{}
	}
	for id, at := range p {
		u.written[id] = at
	}
	return p
}

// recordKeyUse writes noted key uses every keyUseFlush until ctx ends, and
// once more then.
func (s *server) recordKeyUse(ctx context.Context) {
	t := time.NewTicker(keyUseFlush)
	defer t.Stop()
	flush := func(ctx context.Context) {
		used := s.keyUse.take()
		if used == nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.access.TouchAPIKeys(ctx, used); err != nil {
			s.logger.WarnContext(ctx, "recording API key use failed", "component", "http", "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			flush(ctx)
		}
	}
}
