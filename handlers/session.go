package handlers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/google/uuid"
	"github.com/gorilla/sessions"

	"flint/auth"
)

// Sessions. The cookie, signed and encrypted by gorilla/sessions, carries a
// random session token; the database keeps its hash with the user and the
// session's CSRF token. A login always mints a new token (no session
// fixation); logout deletes the row, so the cookie is worthless after it.

const (
	sessionTTL = 12 * time.Hour
	// loginCookie carries the CSRF token of the login form (double submit),
	// before there is a session.
	loginCookie = "flint_login"
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
	store  *sessions.CookieStore
	name   string
	secure bool
	db     SessionStore
	limit  *loginLimiter
}

// SessionStore is what sessions need from storage; *db.Store implements it.
type SessionStore interface {
	Authenticate(ctx context.Context, email, password string) (auth.User, error)
	CreateSession(ctx context.Context, userID uuid.UUID, token, csrf string, ttl time.Duration, ip, userAgent string) error
	GetSession(ctx context.Context, token string) (auth.Session, error)
	DeleteSession(ctx context.Context, token string) error
	// SincePasswordChange is how long ago the user's password was last
	// set; jobs.ErrNotFound when never (or no such user).
	SincePasswordChange(ctx context.Context, email string) (time.Duration, error)
}

func newSessionManager(cfg SessionConfig, st SessionStore) *sessionManager {
	hashKey := sha256.Sum256(append([]byte("flint-hash:"), cfg.Key...))
	blockKey := sha256.Sum256(append([]byte("flint-block:"), cfg.Key...))
	cs := sessions.NewCookieStore(hashKey[:], blockKey[:])
	cs.Options = &sessions.Options{Path: "/", MaxAge: int(sessionTTL.Seconds()), HttpOnly: true,
		Secure: cfg.Secure, SameSite: http.SameSiteLaxMode}
	name := "flint_session"
	if cfg.Secure {
		name = "__Host-flint_session"
	}
	return &sessionManager{store: cs, name: name, secure: cfg.Secure, db: st, limit: newLoginLimiter()}
}

// responseRecorder collects the headers gorilla writes (Set-Cookie).
type responseRecorder struct{ h http.Header }

func (r *responseRecorder) Header() http.Header         { return r.h }
func (r *responseRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *responseRecorder) WriteHeader(int)             {}

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
	}
	next := c.OriginalURL()
	if isHX(c) || c.Method() != fiber.MethodGet {
		next = "/"
	}
	dest := "/login?next=" + url.QueryEscape(next)
	if isHX(c) {
		c.Set("HX-Redirect", dest)
		return c.SendStatus(http.StatusUnauthorized)
	}
	return c.Redirect(dest, http.StatusSeeOther)
}

// csrfProtect refuses state-changing requests that do not carry the
// session's CSRF token (X-CSRF-Token header from HTMX, or the _csrf form
// field) or that come from another site.
func csrfProtect(c *fiber.Ctx) error {
	switch c.Method() {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		return c.Next()
	}
	if site := c.Get("Sec-Fetch-Site"); site == "cross-site" {
		return csrfRefused(c)
	}
	if origin := c.Get("Origin"); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, string(c.Request().Host())) {
			return csrfRefused(c)
		}
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

// loginLimiter throttles failed logins per client address and per account:
// after 5 failures for an account or 20 from an address within 15 minutes,
// further attempts are refused until the window passes, whatever the
// password.
type loginLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time
}

const (
	loginWindow    = 15 * time.Minute
	maxPerAccount  = 5
	maxPerAddress  = 20
	limiterMaxKeys = 100_000
)

func newLoginLimiter() *loginLimiter { return &loginLimiter{failures: map[string][]time.Time{}} }

func (l *loginLimiter) recent(key string, now time.Time) int {
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
	return len(ts)
}

// throttle says which limit refuses a sign-in attempt now.
type throttle int

const (
	notThrottled throttle = iota
	addressThrottled
	accountThrottled
)

// check reports whether an attempt may be checked at all, and if not,
// which limit refuses it.
func (l *loginLimiter) check(ip, email string) throttle {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	switch {
	case l.recent("ip:"+ip, now) >= maxPerAddress:
		return addressThrottled
	case l.recent("acct:"+strings.ToLower(email), now) >= maxPerAccount:
		return accountThrottled
	}
	return notThrottled
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

func (l *loginLimiter) fail(ip, email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failures) > limiterMaxKeys {
		l.failures = map[string][]time.Time{} // under a flood, forget rather than grow
	}
	now := time.Now()
	for _, k := range []string{"ip:" + ip, "acct:" + strings.ToLower(email)} {
		l.failures[k] = append(l.failures[k], now)
	}
}

func (l *loginLimiter) succeed(email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.failures, "acct:"+strings.ToLower(email))
}
