package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

func TestDashboardRequiresLogin(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	anon := &dashBundle{app: b.app, cookies: map[string]string{}}
	p := anon.request(t, http.MethodGet, "/jobs?status=queued", nil)
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/login?next=%2Fjobs%3Fstatus%3Dqueued", p.header.Get("Location"))
	p = anon.request(t, http.MethodGet, "/overview/live", nil, "HX-Request", "true")
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Equal(t, "/login?next=%2F", p.header.Get("HX-Redirect"))
	// The API is untouched by the dashboard's middleware.
	api := anon.request(t, http.MethodGet, "/api/v1/jobs", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, api.status)
}

func TestLoginFailures(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	c := &dashBundle{app: b.app, cookies: map[string]string{}}
	p := c.login(t, adminEmail, "wrong password", http.StatusUnauthorized)
	require.Contains(t, p.body, "Wrong email or password")
	c.login(t, "nobody@example.com", "whatever12", http.StatusUnauthorized)
	// A login form posted without its token is refused.
	p = c.request(t, http.MethodPost, "/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
	require.Equal(t, http.StatusForbidden, p.status)
}

// TestThrottleCannotLockTheOwnerOut: failed sign-ins slow down the
// address they come from, and an account's failures slow down only
// addresses it has never signed in from; the owner, at an address they
// have signed in from before, gets in whatever an attacker does.
func TestThrottleCannotLockTheOwnerOut(t *testing.T) {
	t.Parallel()
	clock := jobs.NewFakeClock(time.Now())
	b := dashSetupWith(t, func(cfg *handlers.Config) { cfg.Clock = clock })
	const home = "203.0.113.10"
	owner := &dashBundle{app: b.app, cookies: map[string]string{}}
	owner.loginFrom(t, home, adminEmail, adminPassword, http.StatusSeeOther)

	// An attacker guesses the admin's password from several addresses.
	attacker := &dashBundle{app: b.app, cookies: map[string]string{}}
	for i := range 5 {
		attacker.loginFrom(t, "198.51.100."+strconv.Itoa(i+1), adminEmail, "guess number "+strconv.Itoa(i), http.StatusUnauthorized)
	}
	// The owner, at an address they signed in from before, gets in.
	owner.loginFrom(t, home, adminEmail, adminPassword, http.StatusSeeOther)
	// The account is slowed down for new addresses, even with the right
	// password.
	p := attacker.loginFrom(t, "198.51.100.99", adminEmail, adminPassword, http.StatusTooManyRequests)
	require.Contains(t, p.body, "Too many failed sign-ins for this account from new addresses")
	retry, err := strconv.Atoi(p.header.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 1, retry, "a slow-down that grows with the failures, not a lockout")
	// And only slowed down: once the wait is over, the next attempt is
	// checked; each failure doubles the wait, up to 5 minutes.
	clock.Advance(time.Second)
	attacker.loginFrom(t, "198.51.100.98", adminEmail, "guess number 6", http.StatusUnauthorized)
	p = attacker.loginFrom(t, "198.51.100.97", adminEmail, "guess number 7", http.StatusTooManyRequests)
	require.Equal(t, "2", p.header.Get("Retry-After"))

	// One address failing again and again is slowed down itself, for any
	// account, without touching anybody else.
	noisy := &dashBundle{app: b.app, cookies: map[string]string{}}
	for i := range 10 {
		noisy.loginFrom(t, "192.0.2.7", "user"+strconv.Itoa(i)+"@example.com", "nope nope", http.StatusUnauthorized)
	}
	p = noisy.loginFrom(t, "192.0.2.7", "someone@example.com", "nope nope", http.StatusTooManyRequests)
	require.Contains(t, p.body, "Too many failed sign-ins from this address")
	noisy.loginFrom(t, "192.0.2.8", "someone@example.com", "nope nope", http.StatusUnauthorized)
	owner.loginFrom(t, home, adminEmail, adminPassword, http.StatusSeeOther)

	// An IPv6 client is counted by its /64: changing the low bits buys
	// nothing.
	for i := range 10 {
		noisy.loginFrom(t, "2001:db8:1:2::"+strconv.Itoa(i+1), "v6-"+strconv.Itoa(i)+"@example.com", "nope nope", http.StatusUnauthorized)
	}
	noisy.loginFrom(t, "2001:db8:1:2::ffff", "v6@example.com", "nope nope", http.StatusTooManyRequests)
	noisy.loginFrom(t, "2001:db8:1:3::1", "v6@example.com", "nope nope", http.StatusUnauthorized)

	// X-Forwarded-For is believed only from a trusted proxy, and only its
	// last hop: what the client wrote to the left is ignored.
	p = noisy.loginFrom(t, "203.0.113.10, 192.0.2.7", "someone@example.com", "nope nope", http.StatusTooManyRequests)
	require.Contains(t, p.body, "from this address")
}

// TestPasswordResetLiftsTheLockout: an admin slowed down by failed
// sign-ins at a new address is given a new password from a shell (flint
// users reset-password, which writes the database and cannot reach the
// server's memory) and signs in with it at once; the guesses from before
// the reset no longer count, the ones after it do.
func TestPasswordResetLiftsTheLockout(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	c := &dashBundle{app: b.app, cookies: map[string]string{}}
	for i := range 5 {
		c.loginFrom(t, "198.51.100."+strconv.Itoa(i+1), adminEmail, "a wrong guess", http.StatusUnauthorized)
	}
	c.loginFrom(t, "192.0.2.1", adminEmail, adminPassword, http.StatusTooManyRequests)

	admin, err := b.store.UserByEmail(b.ctx, adminEmail)
	require.NoError(t, err)
	_, err = b.store.SetPassword(b.ctx, admin.ID, "the new admin password", "") // what reset-password does
	require.NoError(t, err)
	c.loginFrom(t, "192.0.2.1", adminEmail, "the new admin password", http.StatusSeeOther)

	// Failures after the reset count again.
	d := &dashBundle{app: b.app, cookies: map[string]string{}}
	for i := range 5 {
		d.loginFrom(t, "198.51.100."+strconv.Itoa(i+10), adminEmail, "another wrong guess", http.StatusUnauthorized)
	}
	d.loginFrom(t, "192.0.2.2", adminEmail, "the new admin password", http.StatusTooManyRequests)
	// The address the admin signed in from after the reset is known.
	d.loginFrom(t, "192.0.2.1", adminEmail, "the new admin password", http.StatusSeeOther)
}

// TestLoginReturnsToNext sends a user back to the page that asked them to
// sign in, and never off the site or into a forged header.
func TestLoginReturnsToNext(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	c := &dashBundle{app: b.app, cookies: map[string]string{}}
	signIn := func(next string) string {
		t.Helper()
		lp := c.request(t, http.MethodGet, "/login?next="+url.QueryEscape(next), nil)
		require.Equal(t, http.StatusOK, lp.status)
		p := c.request(t, http.MethodPost, "/login", url.Values{"email": {adminEmail}, "password": {adminPassword}, "_csrf": {c.csrf}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		loc := p.header.Get("Location")
		require.NotContains(t, loc, "\r")
		require.NotContains(t, loc, "\n")
		require.NotContains(t, loc, "\t")
		return loc
	}

	p := c.request(t, http.MethodGet, "/jobs?status=queued&queue=mail", nil)
	require.Equal(t, http.StatusSeeOther, p.status)
	lp := c.request(t, http.MethodGet, p.header.Get("Location"), nil)
	require.Contains(t, lp.body, `name="next" value="/jobs?status=queued&amp;queue=mail"`, "the form carries where to go")
	require.Equal(t, "/jobs?status=queued&queue=mail", signIn("/jobs?status=queued&queue=mail"))
	require.Equal(t, "/%0d%0aSet-Cookie:x", signIn("/%0d%0aSet-Cookie:x"), "escaped line breaks stay escaped")

	for _, hostile := range []string{
		"//evil.example/", "/\\evil.example", "/%5Cevil.example", "https://evil.example/",
		"/x\r\nSet-Cookie: pwn=1", "/\t/evil.example", "javascript:alert(1)", "evil.example", "",
	} {
		require.Equal(t, "/", signIn(hostile), "%q", hostile)
	}
}

func TestLoginRenewsSessionAndLogoutEndsIt(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	first := b.cookies["flint_session"]
	require.NotEmpty(t, first)
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)
	require.NotEqual(t, first, b.cookies["flint_session"], "a new session at every login")
	old := &dashBundle{app: b.app, cookies: map[string]string{"flint_session": first}}
	require.Equal(t, http.StatusOK, old.request(t, http.MethodGet, "/", nil).status, "the earlier session stays valid until it ends")

	cookie := b.cookies["flint_session"]
	p := b.request(t, http.MethodPost, "/logout", url.Values{"_csrf": {b.csrf}})
	require.Equal(t, http.StatusSeeOther, p.status)
	replay := &dashBundle{app: b.app, cookies: map[string]string{"flint_session": cookie}}
	require.Equal(t, http.StatusSeeOther, replay.request(t, http.MethodGet, "/", nil).status, "the cookie is worthless after logout")
}

func TestSessionCookieFlags(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	_, err := store.EnsureUser(context.Background(), adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	app := handlers.New(handlers.Config{APIKey: apiKey, Dashboard: store,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef"), Secure: true}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	setCookie := func(resp *http.Response, name string) string {
		for _, v := range resp.Header.Values("Set-Cookie") {
			if strings.HasPrefix(v, name+"=") {
				return v
			}
		}
		return ""
	}
	post := func(cookie *http.Cookie, csrf string) *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"email": {adminEmail}, "password": {adminPassword}, "_csrf": {csrf}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(cookie)
		resp, err := app.Test(req)
		require.NoError(t, err)
		return resp
	}

	// The login form's token cookie is a __Host- cookie: only this origin,
	// over HTTPS, can set it.
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/login", nil))
	require.NoError(t, err)
	set := setCookie(resp, "__Host-flint_login")
	require.NotEmpty(t, set, "secure deployments use a __Host- login cookie")
	for _, flag := range []string{"HttpOnly", "Secure", "SameSite=Strict", "path=/;"} {
		require.Contains(t, strings.ToLower(set+";"), strings.ToLower(flag))
	}
	require.NotContains(t, strings.ToLower(set), "domain=")
	loginTok := strings.TrimPrefix(strings.SplitN(set, ";", 2)[0], "__Host-flint_login=")

	// A token planted in a cookie without the prefix (from a sibling
	// subdomain, or over plain HTTP) is worth nothing.
	resp = post(&http.Cookie{Name: "flint_login", Value: "planted-by-someone-else-0123456789abcdef"}, "planted-by-someone-else-0123456789abcdef")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, setCookie(resp, "__Host-flint_session"))

	resp = post(&http.Cookie{Name: "__Host-flint_login", Value: loginTok}, loginTok)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	set = setCookie(resp, "__Host-flint_session")
	require.NotEmpty(t, set, "secure deployments use a __Host- cookie")
	for _, flag := range []string{"HttpOnly", "Secure", "SameSite=Lax", "Path=/"} {
		require.Contains(t, set, flag)
	}
	require.Contains(t, setCookie(resp, "__Host-flint_login"), "expires=Thu, 01 Jan 1970", "the login form's token ends with the sign-in")
}

// TestSignInRefusesOtherSites: a sign-in posted by another site's page
// (login CSRF: it would sign this browser in as the attacker) is refused
// with a 403 that says why, whatever tokens it carries; the same form
// posted from this site signs in. A session cookie that came with the
// request never becomes the new session.
func TestSignInRefusesOtherSites(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	attacker := b.cookies["flint_session"] // a valid session, someone else's
	c := &dashBundle{app: b.app, cookies: map[string]string{}}
	signIn := func(headers ...string) page {
		t.Helper()
		lp := c.request(t, http.MethodGet, "/login", nil)
		require.Equal(t, http.StatusOK, lp.status)
		return c.request(t, http.MethodPost, "/login", url.Values{"email": {adminEmail}, "password": {adminPassword}, "_csrf": {c.csrf}}, headers...)
	}
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"another origin", []string{"Origin", "https://evil.example"}},
		{"another origin, same host name elsewhere", []string{"Origin", "https://example.com.evil.example"}},
		{"cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}},
		{"a sibling subdomain", []string{"Sec-Fetch-Site", "same-site", "Origin", "https://blog.example.com"}},
		{"an opaque origin", []string{"Origin", "null"}},
		// The site is served over plain HTTP here: https://example.com is
		// another origin (scheme, host and port make one).
		{"the same host over another scheme", []string{"Origin", "https://example.com"}},
		{"the same host over another scheme, same-origin claimed", []string{"Origin", "https://example.com", "Sec-Fetch-Site", "same-origin"}},
	} {
		p := signIn(tc.headers...)
		require.Equal(t, http.StatusForbidden, p.status, tc.name)
		require.Contains(t, p.body, "sent from another site", tc.name)
		require.Empty(t, c.cookies["flint_session"], "%s: no session", tc.name)
	}

	c.cookies["flint_session"] = attacker // planted
	p := signIn("Origin", "http://example.com", "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.NotEmpty(t, c.cookies["flint_session"])
	require.NotEqual(t, attacker, c.cookies["flint_session"], "a fresh session, never the planted one")
	require.Empty(t, c.cookies["flint_login"], "the login form's token ends with the sign-in")
	require.Equal(t, http.StatusOK, c.request(t, http.MethodGet, "/", nil).status)
}

func TestCSRFRequired(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"no token", []string{"HX-Request", "true"}},
		{"wrong token", []string{"HX-Request", "true", "X-CSRF-Token", "forged"}},
		{"cross-site", []string{"HX-Request", "true", "X-CSRF-Token", b.csrf, "Sec-Fetch-Site", "cross-site"}},
		{"foreign origin", []string{"HX-Request", "true", "X-CSRF-Token", b.csrf, "Origin", "https://evil.example"}},
	} {
		p := b.request(t, http.MethodPost, "/jobs/"+j.ID.String()+"/cancel", url.Values{}, tc.headers...)
		require.Equal(t, http.StatusForbidden, p.status, tc.name)
	}
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, got.Status, "nothing happened")
	ok := b.hx(t, http.MethodPost, "/jobs/"+j.ID.String()+"/cancel", url.Values{}, "job-live")
	require.Equal(t, http.StatusOK, ok.status)
	require.Contains(t, ok.header.Get("HX-Trigger"), "Cancelled")
}

// TestSignInSchemeBehindProxy: behind a trusted reverse proxy that says
// the browser came over HTTPS, an https Origin of this host signs in and
// an http one is another origin.
func TestSignInSchemeBehindProxy(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	for _, tc := range []struct {
		origin string
		status int
	}{{"http://example.com", http.StatusForbidden}, {"https://example.com", http.StatusSeeOther}} {
		c := &dashBundle{app: b.app, cookies: map[string]string{}}
		require.Equal(t, http.StatusOK, c.request(t, http.MethodGet, "/login", nil).status)
		p := c.request(t, http.MethodPost, "/login", url.Values{"email": {adminEmail}, "password": {adminPassword}, "_csrf": {c.csrf}},
			"Origin", tc.origin, "X-Forwarded-Proto", "https")
		require.Equal(t, tc.status, p.status, tc.origin)
	}
}
