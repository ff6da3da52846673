package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/google/uuid"
	"github.com/gorilla/sessions"

	"github.com/flinthq/flint/internal/auth"
)

// Sessions. The cookie, signed and encrypted by gorilla/sessions, carries a
// random session token; the database keeps its hash with the user and the
// session's CSRF token. A login always mints a new token (no session
// fixation); logout deletes the row, so the cookie is worthless after it.

const sessionTTL = 12 * time.Hour

// The login cookie carries the CSRF token of the login form (double
// submit), before there is a session. In production it is a __Host-
// cookie (Secure, Path=/, no Domain): nothing but this origin over HTTPS
// can set it, so a sibling subdomain or a network attacker cannot plant a
// token of their choosing and then post their own credentials with it.
const (
	loginCookie       = "flint_login"
	secureLoginCookie = "__Host-flint_login"
)

// SessionConfig configures dashboard sessions.
type SessionConfig struct {
	// Key signs and encrypts cookies: 32 or 64 bytes of secret.
	Key []byte
	// Secure marks cookies Secure and names the session cookie __Host-
	// (production); development over plain HTTP turns it off.
	Secure bool
}

type sessionManager struct {
	store     *sessions.CookieStore
	name      string
	loginName string // the login cookie's name
	secure    bool
	db        SessionStore
	limit     *loginLimiter
}

// SessionStore is what sessions need from storage; *db.Store implements it.
type SessionStore interface {
	// Authenticate checks an email and password. A disabled person with
	// the right password is auth.ErrDisabled; a wrong password never says
	// whether the account exists.
	Authenticate(ctx context.Context, email, password string) (auth.User, error)
	// CreateSession stores a session, and address (throttleAddress of
	// ip) as one the user has signed in from.
	CreateSession(ctx context.Context, userID uuid.UUID, token, csrf string, ttl time.Duration, ip, address, userAgent string) error
	// GetSession returns the live session behind token; domain.ErrNotFound
	// when it ended or never was.
	GetSession(ctx context.Context, token string) (auth.Session, error)
	// DeleteSession ends the session behind token.
	DeleteSession(ctx context.Context, token string) error
	// SincePasswordChange is how long ago the user's password was last
	// set; domain.ErrNotFound when never (or no such user).
	SincePasswordChange(ctx context.Context, email string) (time.Duration, error)
	// KnownAddress reports whether the user with this email has signed in
	// from address (as CreateSession recorded it) within 180 days.
	KnownAddress(ctx context.Context, email, address string) (bool, error)
}

func newSessionManager(cfg SessionConfig, st SessionStore) *sessionManager {
	hashKey := sha256.Sum256(append([]byte("flint-hash:"), cfg.Key...))
	blockKey := sha256.Sum256(append([]byte("flint-block:"), cfg.Key...))
	cs := sessions.NewCookieStore(hashKey[:], blockKey[:])
	cs.Options = &sessions.Options{Path: "/", MaxAge: int(sessionTTL.Seconds()), HttpOnly: true,
		Secure: cfg.Secure, SameSite: http.SameSiteLaxMode}
	name, loginName := "flint_session", loginCookie
	if cfg.Secure {
		name, loginName = "__Host-flint_session", secureLoginCookie
	}
	return &sessionManager{store: cs, name: name, loginName: loginName, secure: cfg.Secure, db: st, limit: newLoginLimiter()}
}

// responseRecorder collects the headers gorilla writes (Set-Cookie).
type responseRecorder struct{ h http.Header }

// Header returns the headers written so far.
func (r *responseRecorder) Header() http.Header { return r.h }

// Write discards the body: only the headers are wanted.
func (r *responseRecorder) Write(b []byte) (int, error) { return len(b), nil }

// WriteHeader discards the status.
func (r *responseRecorder) WriteHeader(int) {}

// load reads the session token from the cookie.
func (m *sessionManager) token(c *fiber.Ctx) string {
	req, err := adaptor.ConvertRequest(c, false)
	if err != nil {
		return ""
	}
	s, err := m.store.Get(req, m.name)
	if err != nil {
		return ""
	}
	tok, _ := s.Values["token"].(string)
	return tok
}

// save writes (or, with token "", expires) the session cookie.
func (m *sessionManager) save(c *fiber.Ctx, token string) error {
	req, err := adaptor.ConvertRequest(c, false)
	if err != nil {
		return err
	}
	s, _ := m.store.New(req, m.name)
	rec := &responseRecorder{h: http.Header{}}
	if token == "" {
		s.Options.MaxAge = -1
	} else {
		s.Values["token"] = token
	}
	if err := s.Save(req, rec); err != nil {
		return err
	}
	for _, v := range rec.h.Values("Set-Cookie") {
		c.Response().Header.Add("Set-Cookie", v)
	}
	return nil
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// userKey and csrfKey hold the signed-in user and CSRF token in Locals.
const (
	userKey = "user"
	csrfKey = "csrf"
	tokKey  = "session_token"
)

// requireLogin lets signed-in users through and sends others to the login
// page (HTMX requests get HX-Redirect, so the whole page changes).
func (m *sessionManager) requireLogin(c *fiber.Ctx) error {
	tok := m.token(c)
	if tok != "" {
		sess, err := m.db.GetSession(c.UserContext(), tok)
		if err == nil {
			c.Locals(userKey, sess.User)
			c.Locals(csrfKey, sess.CSRFToken)
			c.Locals(tokKey, tok)
			return c.Next()
		}
		if databaseUnavailable(err) || diskFull(err) {
			return err // not signed out: the database is away, and the error handler says so
		}
	}
	if wantsEventStream(c) {
		return signedOutStream(c)
	}
	next := c.OriginalURL()
	if isHX(c) || c.Method() != fiber.MethodGet {
		next = "/"
		// An HTMX request comes from a page: back to that page.
		if u, err := url.Parse(c.Get("HX-Current-URL")); err == nil && isHX(c) && u.Path != "" {
			next = u.RequestURI()
		}
	}
	dest := "/login?next=" + url.QueryEscape(next)
	if isHX(c) {
		c.Set("HX-Redirect", dest)
		return c.SendStatus(http.StatusUnauthorized)
	}
	return c.Redirect(dest, http.StatusSeeOther)
}

// wantsEventStream reports whether c is a browser's EventSource request
// (it asks for text/event-stream).
func wantsEventStream(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodGet && strings.Contains(c.Get(fiber.HeaderAccept), "text/event-stream")
}

// signedOutStream answers a signed-out EventSource (the session ended, or
// Flint restarted with a new session key) with a stream it understands: one
// "ended" event, as a stream whose session ends while open gets, on which
// the page reloads and so reaches the sign-in page with itself as the
// place to come back to. A redirect to the sign-in page would answer it
// with HTML, which EventSource refuses and retries forever.
func signedOutStream(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Flint-Signed-Out", "1")
	return c.Status(http.StatusOK).SendString("retry: 2000\n\nevent: ended\ndata: signed out\n\n")
}

// csrfProtect refuses state-changing requests that do not carry the
// session's CSRF token (X-CSRF-Token header from HTMX, or the _csrf form
// field) or that come from another site.
func (s *server) csrfProtect(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return c.Next()
	}
	if s.fromAnotherSite(c, false) {
		return csrfRefused(c)
	}
	want, _ := c.Locals(csrfKey).(string)
	got := c.Get("X-CSRF-Token")
	if got == "" {
		got = c.FormValue("_csrf")
	}
	if want == "" || !equalTokens(want, got) {
		return csrfRefused(c)
	}
	return c.Next()
}

// fromAnotherSite reports whether the browser says the request was sent
// by a page of another origin: Sec-Fetch-Site cross-site or same-site (a
// sibling subdomain), or an Origin whose scheme or host is not this
// site's (https://host is another origin than http://host). An Origin of
// "null" (a sandboxed frame, a redirect across origins) counts as
// foreign when nullForeign is set; elsewhere the session's CSRF token
// decides. Requests without either header (not from a browser) pass.
func (s *server) fromAnotherSite(c *fiber.Ctx, nullForeign bool) bool {
	switch c.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	origin := c.Get("Origin")
	if origin == "" {
		return false
	}
	if origin == "null" {
		return nullForeign
	}
	u, err := url.Parse(origin)
	return err != nil || !strings.EqualFold(u.Host, string(c.Request().Host())) || !strings.EqualFold(u.Scheme, s.siteScheme(c))
}

// siteScheme is the scheme browsers reach this site by: https over TLS;
// behind a trusted reverse proxy (Config.TrustedProxies), what its
// X-Forwarded-Proto says; otherwise https in production (its cookies are
// Secure: no session works over plain HTTP) and http in development.
func (s *server) siteScheme(c *fiber.Ctx) string {
	if c.Context().IsTLS() {
		return "https"
	}
	if peer, ok := netip.AddrFromSlice(c.Context().RemoteIP()); ok && s.trustedProxy(peer.Unmap()) {
		protos := strings.Split(c.Get(fiber.HeaderXForwardedProto), ",")
		if p := strings.ToLower(strings.TrimSpace(protos[len(protos)-1])); p == "http" || p == "https" {
			return p
		}
	}
	if s.sessions != nil && s.sessions.secure {
		return "https"
	}
	return "http"
}

func equalTokens(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func csrfRefused(c *fiber.Ctx) error {
	if isHX(c) {
		toast(c, "Refused: the request lacked this session's security token. Reload the page and try again.", toastBad)
	}
	return c.Status(http.StatusForbidden).SendString("Forbidden: missing or wrong CSRF token. Reload the page and try again.")
}

// loginLimiter throttles failed sign-ins, in this process's memory, by
// address and by account, slowing guesses down rather than locking anyone
// out:
//
//   - An address (an IPv4 address, or an IPv6 /64) may fail 10 times in an
//     hour; after that each further attempt waits 1 s, 2 s, 4 s, ... up to
//     15 minutes after its last failure. An attacker's own address slows
//     down; nobody else's does.
//   - An account may fail 5 times in an hour; after that attempts from
//     addresses it has never signed in from wait 1 s, 2 s, 4 s, ... up to 5
//     minutes after its last failure. Addresses it has signed in from
//     before (within 180 days, recorded in the database) are not slowed
//     by the account's failures, so guesses from elsewhere cannot lock the
//     owner out.
//
// A refused attempt is not checked and not counted. A success forgets
// nothing (the owner signing in must not hand an attacker fresh
// attempts); failures age out of the window, and setting a password
// forgets the account's failures from before it (forgetBefore).
type loginLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time
	now      func() time.Time
}

// throttleRule is how failures of one kind of key slow it down.
type throttleRule struct {
	free      int           // failures in the window before any wait
	base, max time.Duration // the first wait, doubled per failure up to max
}

var (
	addressThrottle = throttleRule{free: 10, base: time.Second, max: 15 * time.Minute}
	accountThrottle = throttleRule{free: 5, base: time.Second, max: 5 * time.Minute}
)

const (
	loginWindow    = time.Hour
	limiterMaxKeys = 100_000
)

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{failures: map[string][]time.Time{}, now: time.Now}
}

// recent returns key's failures within the window, dropping older ones.
func (l *loginLimiter) recent(key string, now time.Time) []time.Time {
	ts := l.failures[key]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) > loginWindow {
		i++
	}
	ts = ts[i:]
	if len(ts) == 0 {
		delete(l.failures, key)
	} else {
		l.failures[key] = ts
	}
	return ts
}

// wait is how long after now a key with these failures must wait.
func (r throttleRule) wait(ts []time.Time, now time.Time) time.Duration {
	over := len(ts) - r.free
	if over < 0 {
		return 0
	}
	d := r.max
	if over < 30 && r.base<<over < r.max {
		d = r.base << over
	}
	return max(0, ts[len(ts)-1].Add(d).Sub(now))
}

// check returns how long the address and the account must each wait
// before an attempt is checked (0: now).
func (l *loginLimiter) check(address, email string) (addressWait, accountWait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	return addressThrottle.wait(l.recent("ip:"+address, now), now),
		accountThrottle.wait(l.recent("acct:"+strings.ToLower(email), now), now)
}

// forgetBefore drops the account's failures from before t, when its
// password was set: they were guesses at a password that is gone. (The
// address keeps counting them.)
func (l *loginLimiter) forgetBefore(email string, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := "acct:" + strings.ToLower(email)
	ts := l.failures[key]
	i := 0
	for i < len(ts) && !ts[i].After(t) {
		i++
	}
	if i == len(ts) {
		delete(l.failures, key)
	} else {
		l.failures[key] = ts[i:]
	}
}

func (l *loginLimiter) fail(address, email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) > limiterMaxKeys {
		l.failures = map[string][]time.Time{} // under a flood, forget rather than grow
	}
	now := l.now()
	for _, k := range []string{"ip:" + address, "acct:" + strings.ToLower(email)} {
		l.failures[k] = append(l.failures[k], now)
	}
}
