// Sign-in and sign-out pages.

package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

func (s *server) loginPage(c *fiber.Ctx) error {
	return render(c, http.StatusOK, views.LoginPage(s.loginToken(c), "", loginRedirectTarget(c.Query("next")), ""))
}

// loginToken returns the login form's CSRF token, setting its cookie.
func (s *server) loginToken(c *fiber.Ctx) string {
	if tok := c.Cookies(s.sessions.loginName); len(tok) >= 32 {
		return tok
	}
	tok := randomToken()
	c.Cookie(s.loginCookie(tok))
	return tok
}

// loginCookie is the login form's token cookie; an empty tok expires it.
// A __Host- cookie must have Path=/; the development one is sent to
// /login only.
func (s *server) loginCookie(tok string) *fiber.Cookie {
	path := "/login"
	if s.sessions.secure {
		path = "/"
	}
	ck := &fiber.Cookie{Name: s.sessions.loginName, Value: tok, Path: path, HTTPOnly: true, Secure: s.sessions.secure,
		SameSite: fiber.CookieSameSiteStrictMode, MaxAge: 3600}
	if tok == "" {
		ck.MaxAge, ck.Expires = 0, time.Unix(1, 0)
	}
	return ck
}

func (s *server) login(c *fiber.Ctx) error {
	email := strings.TrimSpace(c.FormValue("email"))
	password := c.FormValue("password")
	next := loginRedirectTarget(c.FormValue("next"))
	// Sign-in is the one state-changing form without a session to hold a
	// CSRF token, so the browser's word on where it came from decides:
	// another site posting its own credentials would sign this browser in
	// as the attacker (login CSRF).
	if s.fromAnotherSite(c, true) {
		s.logger.WarnContext(c.UserContext(), "sign-in from another site refused", "component", "auth", "ip", clientAddr(c), "origin", c.Get("Origin"))
		return render(c, http.StatusForbidden, views.LoginPage(s.loginToken(c), "", next,
			"Refused: this sign-in was sent from another site. Open this site's sign-in page and sign in there."))
	}
	cookieTok := c.Cookies(s.sessions.loginName)
	if cookieTok == "" || !equalTokens(cookieTok, c.FormValue("_csrf")) {
		return render(c, http.StatusForbidden, views.LoginPage(s.loginToken(c), email, next, "The form expired. Please sign in again."))
	}
	if len(email) > 254 || len(password) > 200 || !jobs.CleanText(email) {
		return render(c, http.StatusUnprocessableEntity, views.LoginPage(cookieTok, "", next, "Enter a valid email address and password."))
	}
	ip := clientAddr(c)
	addr := throttleAddress(ip)
	if wait, why := s.signInWait(c, addr, email); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		c.Set("Retry-After", strconv.Itoa(secs))
		return render(c, http.StatusTooManyRequests, views.LoginPage(cookieTok, email, next,
			fmt.Sprintf("Too many failed sign-ins %s. Try again in %s.", why, waitWords(secs))))
	}
	u, err := s.sessions.db.Authenticate(c.UserContext(), email, password)
	if errors.Is(err, auth.ErrBadLogin) {
		s.sessions.limit.fail(addr, email)
		s.logger.WarnContext(c.UserContext(), "failed sign-in", "component", "auth", "ip", ip)
		return render(c, http.StatusUnauthorized, views.LoginPage(cookieTok, email, next, "Wrong email or password."))
	}
	if errors.Is(err, auth.ErrDisabled) {
		return render(c, http.StatusForbidden, views.LoginPage(cookieTok, email, next, "This account is disabled. Ask an admin to enable it."))
	}
	if err != nil {
		return err
	}
	// Always a new session token, whatever cookie came with the request:
	// a planted session cookie never becomes this sign-in's session. The
	// login form's token has served its purpose too.
	token := randomToken()
	if err := s.sessions.db.CreateSession(c.UserContext(), u.ID, token, randomToken(), sessionTTL, ip, addr, c.Get("User-Agent")); err != nil {
		return err
	}
	if err := s.sessions.save(c, token); err != nil {
		return err
	}
	c.Cookie(s.loginCookie(""))
	return c.Redirect(next, http.StatusSeeOther)
}

// signInWait applies the sign-in throttle (loginLimiter): how long this
// attempt must wait, and why in words. An account slowed down by its
// failures is not slowed for an address it has signed in from before,
// and is let in again once its password has been set since them:
// `flint users reset-password` runs in another process and cannot reach
// this one's memory, so both are read from the database (only for an
// account that is being slowed down).
func (s *server) signInWait(c *fiber.Ctx, addr, email string) (time.Duration, string) {
	addrWait, acctWait := s.sessions.limit.check(addr, email)
	if addrWait > 0 {
		return addrWait, "from this address"
	}
	if acctWait == 0 {
		return 0, ""
	}
	ctx := c.UserContext()
	ago, err := s.sessions.db.SincePasswordChange(ctx, email)
	switch {
	case err == nil:
		s.sessions.limit.forgetBefore(email, s.clock.Now().Add(-ago))
		if _, acctWait = s.sessions.limit.check(addr, email); acctWait == 0 {
			return 0, ""
		}
	case !errors.Is(err, domain.ErrNotFound):
		s.logger.WarnContext(ctx, "could not read when a throttled account's password changed", "component", "auth", "error", err)
	}
	known, err := s.sessions.db.KnownAddress(ctx, email, addr)
	if err != nil {
		s.logger.WarnContext(ctx, "could not read a throttled account's sign-in addresses", "component", "auth", "error", err)
	}
	if known {
		return 0, ""
	}
	return acctWait, "for this account from new addresses"
}

// waitWords says a wait in seconds for people.
func waitWords(secs int) string {
	switch {
	case secs <= 1:
		return "a second"
	case secs < 90:
		return strconv.Itoa(secs) + " seconds"
	}
	return strconv.Itoa((secs+59)/60) + " minutes"
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
