// Sign-in and sign-out pages.

package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"flint/auth"
	"flint/jobs"
	"flint/views"
)

func (s *server) loginPage(c *fiber.Ctx) error {
	return render(c, http.StatusOK, views.LoginPage(s.loginToken(c), "", loginRedirectTarget(c.Query("next")), ""))
}

// loginToken returns the login form's CSRF token, setting its cookie.
func (s *server) loginToken(c *fiber.Ctx) string {
	if tok := c.Cookies(loginCookie); len(tok) >= 32 {
		return tok
	}
	tok := randomToken()
	c.Cookie(&fiber.Cookie{Name: loginCookie, Value: tok, Path: "/login", HTTPOnly: true, Secure: s.sessions.secure,
		SameSite: fiber.CookieSameSiteStrictMode, MaxAge: 3600})
	return tok
}

func (s *server) login(c *fiber.Ctx) error {
	email := strings.TrimSpace(c.FormValue("email"))
	password := c.FormValue("password")
	next := loginRedirectTarget(c.FormValue("next"))
	cookieTok := c.Cookies(loginCookie)
	if cookieTok == "" || !equalTokens(cookieTok, c.FormValue("_csrf")) {
		return render(c, http.StatusForbidden, views.LoginPage(s.loginToken(c), email, next, "The form expired. Please sign in again."))
	}
	if len(email) > 254 || len(password) > 200 || !jobs.CleanText(email) {
		return render(c, http.StatusUnprocessableEntity, views.LoginPage(cookieTok, "", next, "Enter a valid email address and password."))
	}
	ip := c.IP()
	if !s.signInAllowed(c, ip, email) {
		c.Set("Retry-After", strconv.Itoa(int(loginWindow.Seconds())))
		return render(c, http.StatusTooManyRequests, views.LoginPage(cookieTok, email, next, "Too many failed sign-ins. Wait 15 minutes and try again."))
	}
	u, err := s.sessions.db.Authenticate(c.UserContext(), email, password)
	if errors.Is(err, auth.ErrBadLogin) {
		s.sessions.limit.fail(ip, email)
		s.logger.WarnContext(c.UserContext(), "failed sign-in", "component", "auth", "ip", ip)
		return render(c, http.StatusUnauthorized, views.LoginPage(cookieTok, email, next, "Wrong email or password."))
	}
	if errors.Is(err, auth.ErrDisabled) {
		return render(c, http.StatusForbidden, views.LoginPage(cookieTok, email, next, "This account is disabled. Ask an admin to enable it."))
	}
	if err != nil {
		return err
	}
	s.sessions.limit.succeed(email)
	token := randomToken()
	if err := s.sessions.db.CreateSession(c.UserContext(), u.ID, token, randomToken(), sessionTTL, ip, c.Get("User-Agent")); err != nil {
		return err
	}
	if err := s.sessions.save(c, token); err != nil {
		return err
	}
	return c.Redirect(next, http.StatusSeeOther)
}

// signInAllowed applies the sign-in throttle. An account refused for its
// failures is let in again once its password has been set since them:
// `flint users reset-password` for a locked-out admin runs in another
// process and cannot reach this one's memory, so the time of the change
// is read from the database (only for an account that is throttled).
func (s *server) signInAllowed(c *fiber.Ctx, ip, email string) bool {
	switch s.sessions.limit.check(ip, email) {
	case notThrottled:
		return true
	case addressThrottled:
		return false
	}
	ago, err := s.sessions.db.SincePasswordChange(c.UserContext(), email)
	if err != nil {
		if !errors.Is(err, jobs.ErrNotFound) {
			s.logger.WarnContext(c.UserContext(), "could not read when a throttled account's password changed", "component", "auth", "error", err)
		}
		return false
	}
	s.sessions.limit.forgetBefore(email, time.Now().Add(-ago))
	return s.sessions.limit.check(ip, email) == notThrottled
}

func (s *server) logout(c *fiber.Ctx) error {
	if tok, _ := c.Locals(tokKey).(string); tok != "" {
		if err := s.sessions.db.DeleteSession(c.UserContext(), tok); err != nil {
			return err
		}
	}
	if err := s.sessions.save(c, ""); err != nil {
		return err
	}
	return c.Redirect("/login", http.StatusSeeOther)
}

// loginRedirectTarget returns next when it is a path on this site, and "/"
// otherwise. url.Parse refuses control characters (no header injection, no
// tab that a browser would drop from "/\t/evil.example"); a host, a scheme,
// "//" or a backslash (which browsers read as a slash) would leave the site.
// The result is re-encoded, so it is safe to put in a Location header.
func loginRedirectTarget(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.Contains(u.Path, "\\") {
		return "/"
	}
	return u.RequestURI()
}
