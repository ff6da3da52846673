package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"flint/auth"
	"flint/db"
	"flint/db/dbtest"
	"flint/handlers"
	"flint/jobs"
)

const (
	adminEmail    = "ops@example.com"
	adminPassword = "correct horse battery"
)

// dashBundle is an app with the dashboard and a signed-in browser-like
// client (cookies kept, CSRF token read from the page).
type dashBundle struct {
	app     *fiber.App
	store   *db.Store
	ctx     context.Context
	cookies map[string]string
	csrf    string
	woken   *wakeLog
}

// wakeLog records the queues the server woke this process's workers for.
type wakeLog struct {
	mu     sync.Mutex
	queues []string
}

func (w *wakeLog) wake(q string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queues = append(w.queues, q)
}

func (w *wakeLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues
	w.queues = nil
	return q
}

func dashSetup(t *testing.T) *dashBundle {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	_, err := store.EnsureUser(ctx, adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
	woken := &wakeLog{}
	app := handlers.New(handlers.Config{
		APIKey: apiKey, Dashboard: store, Wake: woken.wake, Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")},
		Audit:   store,
		MailURL: "http://localhost:8025",
		Benchmark: func(ctx context.Context, n int, alg string) ([]jobs.BenchResult, error) {
			return []jobs.BenchResult{{Algorithm: "heap", Size: n, Op: "insert", NsPerOp: 100}, {Algorithm: "timing_wheel", Size: n, Op: "insert", NsPerOp: 80}}, nil
		},
	}, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b := &dashBundle{app: app, store: store, ctx: ctx, cookies: map[string]string{}, woken: woken}
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)
	return b
}

// Tests need not spend a tenth of a second per password hash.
func init() { auth.BcryptCost = 4 }

type page struct {
	status int
	header http.Header
	body   string
}

func (b *dashBundle) request(t *testing.T, method, path string, form url.Values, headers ...string) page {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.app.Test(req, 30_000)
	require.NoError(t, err)
	defer resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 {
			delete(b.cookies, ck.Name)
		} else {
			b.cookies[ck.Name] = ck.Value
		}
	}
	raw, _ := io.ReadAll(resp.Body)
	p := page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
	if m := csrfMeta.FindStringSubmatch(p.body); m != nil {
		b.csrf = m[1]
	}
	return p
}

var csrfMeta = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

func (b *dashBundle) login(t *testing.T, email, password string, want int) page {
	t.Helper()
	lp := b.request(t, http.MethodGet, "/login", nil)
	require.Equal(t, http.StatusOK, lp.status)
	p := b.request(t, http.MethodPost, "/login", url.Values{"email": {email}, "password": {password}, "_csrf": {b.csrf}})
	require.Equal(t, want, p.status, p.body)
	if want == http.StatusSeeOther {
		b.request(t, http.MethodGet, "/", nil) // pick up the session's CSRF token
	}
	return p
}

// hx sends an HTMX request with the CSRF header, as the page would.
func (b *dashBundle) hx(t *testing.T, method, path string, form url.Values, target string) page {
	t.Helper()
	return b.request(t, method, path, form, "HX-Request", "true", "HX-Target", target, "X-CSRF-Token", b.csrf)
}

func (b *dashBundle) enqueue(t *testing.T, p jobs.EnqueueParams) *jobs.Job {
	t.Helper()
	res, err := b.store.Enqueue(b.ctx, p)
	require.NoError(t, err)
	return res[0].Job
}

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

func TestLoginFailuresAndThrottle(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	c := &dashBundle{app: b.app, cookies: map[string]string{}}
	p := c.login(t, adminEmail, "wrong password", http.StatusUnauthorized)
	require.Contains(t, p.body, "Wrong email or password")
	c.login(t, "nobody@example.com", "whatever12", http.StatusUnauthorized)
	// A login form posted without its token is refused.
	p = c.request(t, http.MethodPost, "/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
	require.Equal(t, http.StatusForbidden, p.status)
	for range 4 {
		c.login(t, adminEmail, "wrong again", http.StatusUnauthorized)
	}
	// Five failures for the account: even the right password waits.
	p = c.login(t, adminEmail, adminPassword, http.StatusTooManyRequests)
	require.Contains(t, p.body, "Too many failed sign-ins")
}

// TestPasswordResetLiftsTheLockout: an admin locked out by failed sign-ins
// is given a new password from a shell (flint users reset-password, which
// writes the database and cannot reach the server's memory) and signs in
// with it at once; the guesses from before the reset no longer count, the
// ones after it do.
func TestPasswordResetLiftsTheLockout(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	c := &dashBundle{app: b.app, cookies: map[string]string{}}
	for range 5 {
		c.login(t, adminEmail, "a wrong guess", http.StatusUnauthorized)
	}
	c.login(t, adminEmail, adminPassword, http.StatusTooManyRequests)

	admin, err := b.store.UserByEmail(b.ctx, adminEmail)
	require.NoError(t, err)
	_, err = b.store.SetPassword(b.ctx, admin.ID, "the new admin password", "") // what reset-password does
	require.NoError(t, err)
	c.login(t, adminEmail, "the new admin password", http.StatusSeeOther)

	// Failures after the reset count again.
	d := &dashBundle{app: b.app, cookies: map[string]string{}}
	for range 5 {
		d.login(t, adminEmail, "another wrong guess", http.StatusUnauthorized)
	}
	d.login(t, adminEmail, "the new admin password", http.StatusTooManyRequests)
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
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
	app := handlers.New(handlers.Config{APIKey: apiKey, Dashboard: store,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef"), Secure: true}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b := &dashBundle{app: app, cookies: map[string]string{}}
	b.request(t, http.MethodGet, "/login", nil)
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"email": {adminEmail}, "password": {adminPassword}, "_csrf": {b.csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "flint_login", Value: b.cookies["flint_login"]})
	resp, err := app.Test(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var set string
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "__Host-flint_session=") {
			set = v
		}
	}
	require.NotEmpty(t, set, "secure deployments use a __Host- cookie")
	for _, flag := range []string{"HttpOnly", "Secure", "SameSite=Lax", "Path=/"} {
		require.Contains(t, set, flag)
	}
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

func TestEveryPageRenders(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	parent := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	child := b.enqueue(t, jobs.EnqueueParams{Type: "noop", DependsOn: []uuidT{parent.ID}})
	b.enqueue(t, jobs.EnqueueParams{Type: "noop", IntervalSeconds: 60})
	cases := []struct {
		path, testid, text string
	}{
		{"/", "counts", "Throughput"},
		{"/jobs", "jobs-table", child.ID.String()},
		{"/jobs?status=blocked", "jobs-table", child.ID.String()},
		{"/jobs/" + child.ID.String(), "graph", parent.ID.String()},
		{"/jobs/new", "create-form", "Create job"},
		{"/jobs/new?clone=" + parent.ID.String(), "create-form", "noop"},
		{"/dlq", "jobs-table", "dead-letter queue is empty"},
		{"/bin", "jobs-table", "The bin is empty"},
		{"/recurring", "recurring-table", "every 60 s"},
		{"/workers", "workers", "No worker is running"},
		{"/settings", "settings-form", "scheduler_strategy"},
		{"/benchmark", "bench-form", "Run"},
	}
	for _, tc := range cases {
		p := b.request(t, http.MethodGet, tc.path, nil)
		require.Equal(t, http.StatusOK, p.status, tc.path)
		require.Contains(t, p.body, `data-testid="`+tc.testid+`"`, tc.path)
		require.Contains(t, p.body, tc.text, tc.path)
		require.Contains(t, p.header.Get("Content-Security-Policy"), "script-src 'self'", tc.path)
		require.Equal(t, "nosniff", p.header.Get("X-Content-Type-Options"))
		require.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
		require.Equal(t, "HX-Request", p.header.Get("Vary"))
		require.NotContains(t, p.body, "<script>", "no inline scripts: "+tc.path)
		require.NotRegexp(t, `\sstyle="`, p.body, "no inline styles (the CSP forbids them): "+tc.path)
	}
	require.Equal(t, http.StatusNotFound, b.request(t, http.MethodGet, "/jobs/"+uuidNew(), nil).status)
	require.Equal(t, http.StatusNotFound, b.request(t, http.MethodGet, "/jobs/not-an-id", nil).status)
	static := b.request(t, http.MethodGet, "/static/vendor/htmx-2.0.11.min.js", nil)
	require.Equal(t, http.StatusOK, static.status)
	require.Contains(t, static.body, "htmx")
}

func TestPartials(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: "mail"})
	// A filter change returns only the table.
	p := b.hx(t, http.MethodGet, "/jobs?queue=mail", nil, "jobs-table")
	require.Equal(t, http.StatusOK, p.status)
	require.True(t, strings.HasPrefix(strings.TrimSpace(p.body), `<div id="jobs-table"`), p.body[:80])
	require.Contains(t, p.body, j.ID.String())
	require.NotContains(t, p.body, "<html")
	p = b.hx(t, http.MethodGet, "/jobs?queue=elsewhere", nil, "jobs-table")
	require.Contains(t, p.body, "No jobs match")
	// Overview and job live parts.
	p = b.hx(t, http.MethodGet, "/overview/live", nil, "overview-live")
	require.Contains(t, p.body, `data-testid="count-queued"`)
	require.NotContains(t, p.body, "<html")
	p = b.hx(t, http.MethodGet, "/jobs/"+j.ID.String()+"/live", nil, "job-live")
	require.Contains(t, p.body, `data-testid="payload"`)
	require.NotContains(t, p.body, "<html")
}

func TestBulkActions(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	a := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	c := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	form := url.Values{"action": {"cancel"}, "ids": {a.ID.String(), c.ID.String()}}
	p := b.hx(t, http.MethodPost, "/jobs/bulk", form, "jobs-table")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.header.Get("HX-Trigger"), "Cancelled: 2 of 2 jobs")
	for _, id := range []uuidT{a.ID, c.ID} {
		got, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateCancelled, got.Status)
	}
	// Retrying cancelled jobs is refused, and the page says why.
	p = b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"retry"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "0 of 1")
	require.Contains(t, p.header.Get("HX-Trigger"), "cannot retry")
	for _, bad := range []url.Values{
		{"action": {"explode"}, "ids": {a.ID.String()}},
		{"action": {"cancel"}},
		{"action": {"cancel"}, "ids": {"nope"}},
	} {
		require.Equal(t, http.StatusUnprocessableEntity, b.hx(t, http.MethodPost, "/jobs/bulk", bad, "jobs-table").status)
	}
	// Delete to the bin, restore, delete again, purge.
	b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"delete"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, b.request(t, http.MethodGet, "/bin", nil).body, a.ID.String())
	p = b.hx(t, http.MethodPost, "/bin/bulk", url.Values{"action": {"restore"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "Restored: 1 of 1")
	b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"delete"}, "ids": {a.ID.String()}}, "jobs-table")
	p = b.hx(t, http.MethodPost, "/bin/bulk", url.Values{"action": {"purge"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "Purged: 1 of 1")
	_, err := b.store.GetJob(b.ctx, a.ID)
	require.ErrorIs(t, err, jobs.ErrNotFound)
}

func TestCreateFormValidation(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	cases := []struct {
		name  string
		form  url.Values
		field string
	}{
		{"bad payload", url.Values{"type": {"noop"}, "payload": {"{not json"}}, "payload"},
		{"payload array", url.Values{"type": {"noop"}, "payload": {"[1]"}}, "payload"},
		{"sleep needs ms", url.Values{"type": {"sleep"}, "payload": {"{}"}}, "payload"},
		{"unknown type", url.Values{"type": {"rm"}, "payload": {"{}"}}, "type"},
		{"retries", url.Values{"type": {"noop"}, "max_retries": {"-3"}}, "max_retries"},
		{"retries text", url.Values{"type": {"noop"}, "max_retries": {"three"}}, "max_retries"},
		{"cron", url.Values{"type": {"noop"}, "cron": {"soon"}}, "cron"},
		{"depends", url.Values{"type": {"noop"}, "depends_on": {"not-an-id"}}, "depends_on"},
		{"run_at", url.Values{"type": {"noop"}, "run_at": {"yesterday"}}, "run_at"},
	}
	for _, tc := range cases {
		p := b.hx(t, http.MethodPost, "/jobs/new", tc.form, "create-form")
		require.Equal(t, http.StatusUnprocessableEntity, p.status, tc.name)
		require.Contains(t, p.body, `data-testid="error-`+tc.field+`"`, tc.name+": "+p.body)
		require.Contains(t, p.body, `id="create-form"`)
	}
	// The values typed stay in the form.
	p := b.hx(t, http.MethodPost, "/jobs/new", url.Values{"type": {"sleep"}, "queue": {"kept-queue"}, "payload": {"{}"}}, "create-form")
	require.Contains(t, p.body, `value="kept-queue"`)

	p = b.hx(t, http.MethodPost, "/jobs/new", url.Values{"type": {"sleep"}, "payload": {`{"ms": 5}`}, "priority": {"high"},
		"queue": {"q1"}, "delay_seconds": {"60"}}, "create-form")
	require.Equal(t, http.StatusNoContent, p.status, p.body)
	loc := p.header.Get("HX-Redirect")
	require.True(t, strings.HasPrefix(loc, "/jobs/"), loc)
	got, err := b.store.GetJob(b.ctx, uuidMust(strings.TrimPrefix(loc, "/jobs/")))
	require.NoError(t, err)
	require.Equal(t, jobs.StateScheduled, got.Status)
	require.Equal(t, 1, got.Priority)
	require.Equal(t, "q1", got.Queue)
}

func TestSettingsForm(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	st := jobs.DefaultSettings()
	form := url.Values{}
	for k, v := range st.Map() {
		form.Set(k, strings.Trim(string(v), `"[]`))
	}
	form.Set("dlq_threshold", "12")
	form.Set("alert_emails", "a@example.com, b@example.com")
	p := b.hx(t, http.MethodPost, "/settings", form, "settings")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Saved: alert_emails, dlq_threshold.")
	got, err := b.store.GetSettings(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 12, got.DLQThreshold)
	require.Equal(t, []string{"a@example.com", "b@example.com"}, got.AlertEmails)
	changes, err := b.store.ListSettingsChanges(b.ctx, 5)
	require.NoError(t, err)
	require.Equal(t, adminEmail+"@0.0.0.0", changes[0].ChangedBy)

	form.Set("dlq_threshold", "0")
	p = b.hx(t, http.MethodPost, "/settings", form, "settings")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, `data-testid="error-dlq_threshold"`)
	for _, bad := range []string{"many", "NaN", "Inf", "-Infinity", "0x1p4", "1_000"} {
		form.Set("dlq_threshold", bad)
		p = b.hx(t, http.MethodPost, "/settings", form, "settings")
		require.Equal(t, http.StatusUnprocessableEntity, p.status, bad)
		require.Contains(t, p.body, "must be a number", bad)
	}
	form.Set("dlq_threshold", "+7")
	p = b.hx(t, http.MethodPost, "/settings", form, "settings")
	require.Equal(t, http.StatusOK, p.status, "a number however written")
	got, err = b.store.GetSettings(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 7, got.DLQThreshold)
}

func TestBenchmarkPageAndAPI(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	p := b.hx(t, http.MethodPost, "/benchmark", url.Values{"n": {"5000"}, "algorithm": {"both"}}, "bench")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `data-testid="bench-results"`)
	require.Contains(t, p.body, "<svg")
	p = b.hx(t, http.MethodPost, "/benchmark", url.Values{"n": {"5"}, "algorithm": {"both"}}, "bench")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	api := b.request(t, http.MethodPost, "/api/v1/benchmark/run", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, api.status, api.body)
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(api.body), &out))
	require.Equal(t, float64(10000), out["n"])
}

var _ = time.Second

// TestAuditTrail: every operator action, from the API and from the
// dashboard, leaves an entry saying who, what, when and from where.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	api := func(method, path, body string) page {
		var form url.Values
		p := b.request(t, method, path, form, "X-API-Key", apiKey, "Content-Type", "application/json")
		_ = body
		return p
	}
	a := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	c := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	series := b.enqueue(t, jobs.EnqueueParams{Type: "noop", IntervalSeconds: 3600})
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/jobs/"+a.ID.String()+"/cancel", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodDelete, "/api/v1/jobs/"+a.ID.String(), "").status)
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/jobs/"+a.ID.String()+"/restore", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodDelete, "/api/v1/jobs/"+a.ID.String(), "").status)
	require.Equal(t, http.StatusOK, api(http.MethodDelete, "/api/v1/jobs/"+a.ID.String()+"?purge=true", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/recurring/"+series.ScheduleID.String()+"/pause", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/dlq/retry", "").status)
	// And from the dashboard.
	b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"cancel"}, "ids": {c.ID.String()}}, "jobs-table")
	form := url.Values{}
	for k, v := range jobs.DefaultSettings().Map() {
		form.Set(k, strings.Trim(string(v), `"[]`))
	}
	form.Set("dlq_threshold", "9")
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/settings", form, "settings").status)
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series.ScheduleID.String()+"/run", nil, "recurring-table").status)

	entries, err := b.store.ListAudit(b.ctx, jobs.AuditQuery{Limit: 100})
	require.NoError(t, err)
	got := map[string]jobs.AuditEntry{}
	for _, e := range entries {
		got[e.Action+"/"+e.Source] = e
	}
	for _, want := range []string{"cancel/api", "delete/api", "restore/api", "purge/api", "series_pause/api", "dlq_replay/api",
		"cancel/dashboard", "settings_change/dashboard", "series_run_now/dashboard"} {
		e, ok := got[want]
		require.True(t, ok, "no audit entry for %s; have %v", want, got)
		require.NotEmpty(t, e.IP)
		require.False(t, e.At.IsZero())
	}
	require.Equal(t, "key:FLINT_API_KEY", got["cancel/api"].Actor)
	require.Equal(t, adminEmail, got["cancel/dashboard"].Actor)
	require.Equal(t, c.ID, *got["cancel/dashboard"].JobID)
	require.NotNil(t, got["series_run_now/dashboard"].JobID, "the occurrence it made is recorded, as from the API")
	require.JSONEq(t, `{"dlq_threshold": 9}`, string(got["settings_change/dashboard"].Details))

	// Shown on the job page, the Audit page and through the API.
	require.Contains(t, b.request(t, http.MethodGet, "/jobs/"+c.ID.String(), nil).body, `data-testid="audit-row"`)
	pageBody := b.request(t, http.MethodGet, "/audit", nil).body
	require.Contains(t, pageBody, "settings_change")
	list := api(http.MethodGet, "/api/v1/audit?job_id="+c.ID.String(), "")
	require.Equal(t, http.StatusOK, list.status)
	require.Contains(t, list.body, `"action":"cancel"`)
	require.Equal(t, http.StatusUnprocessableEntity, api(http.MethodGet, "/api/v1/audit?job_id=x", "").status)
}

// TestDashboardActionsWakeWorkers: what the dashboard makes ready wakes
// this process's workers at once, as the API does, and a database failure
// during an action is an error, not a refusal.
func TestDashboardActionsWakeWorkers(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	dead := func(queue string) *jobs.Job {
		j := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: queue, MaxRetries: new(int)})
		c, err := b.store.ClaimJobs(b.ctx, jobs.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, c, 1)
		_, _, err = b.store.FinishJobs(b.ctx, []jobs.Finish{{Lease: jobs.LeaseOf(c[0]), Outcome: jobs.OutcomeFailed, Error: "boom"}})
		require.NoError(t, err)
		got, err := b.store.GetJob(b.ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, jobs.StateDeadLetter, got.Status)
		return got
	}
	b.woken.take()

	one := dead("mail")
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/jobs/"+one.ID.String()+"/retry", nil, "job-live").status)
	require.Equal(t, []string{"mail"}, b.woken.take(), "retry from the job page")

	dead("a")
	dead("a")
	dead("b")
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/dlq/replay-all", nil, "jobs-table").status)
	woken := b.woken.take()
	slices.Sort(woken)
	require.Equal(t, []string{"a", "b"}, woken, "replay all: once per queue")

	series := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: "cron", IntervalSeconds: 3600})
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series.ScheduleID.String()+"/run", nil, "recurring-table").status)
	require.Equal(t, []string{"cron"}, b.woken.take(), "run now")

	// A refusal is a 409 with the reason; a broken database is a 500.
	p := b.hx(t, http.MethodPost, "/jobs/"+one.ID.String()+"/restore", nil, "job-live")
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.header.Get("HX-Trigger"), "Not possible")
	_, err := b.store.Pool().Exec(b.ctx, `ALTER TABLE jobs RENAME TO jobs_gone`)
	require.NoError(t, err)
	defer func() {
		_, err := b.store.Pool().Exec(b.ctx, `ALTER TABLE jobs_gone RENAME TO jobs`)
		require.NoError(t, err)
	}()
	p = b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"cancel"}, "ids": {one.ID.String()}}, "jobs-table")
	require.Equal(t, http.StatusInternalServerError, p.status)
	require.NotContains(t, p.header.Get("HX-Trigger"), "jobs_gone", "no internal error text in a toast")
}

// TestJobsListPaging: the table pages with keyset cursors, keeps the
// filter across pages, and offers Clear only for a filter, not a page.
func TestJobsListPaging(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	params := make([]jobs.EnqueueParams, 60)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "noop", Queue: "paged"}
	}
	_, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)

	first := b.request(t, http.MethodGet, "/jobs?queue=paged", nil)
	require.Equal(t, http.StatusOK, first.status)
	require.Contains(t, first.body, `>Clear</a>`, "a filter can be cleared")
	require.Contains(t, first.body, `<option value="paged">`, "the queue filter suggests known queues")
	next := regexp.MustCompile(`href="(/jobs\?[^"]*cursor=[^"]*)"[^>]*data-testid="next-page"`).FindStringSubmatch(first.body)
	require.NotNil(t, next, "a next page link")
	nextURL := strings.ReplaceAll(next[1], "&amp;", "&")
	require.Contains(t, nextURL, "queue=paged", "the filter carries over")

	second := b.request(t, http.MethodGet, nextURL, nil)
	require.Equal(t, http.StatusOK, second.status)
	require.Equal(t, 10, strings.Count(second.body, `data-testid="job-row"`))
	require.Contains(t, second.body, "First page")

	unfiltered := b.request(t, http.MethodGet, strings.Replace(nextURL, "queue=paged", "", 1), nil)
	require.Equal(t, http.StatusOK, unfiltered.status)
	require.NotContains(t, unfiltered.body, `>Clear</a>`, "page two of everything has nothing to clear")
}

func TestFavicon(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	anon := &dashBundle{app: b.app, cookies: map[string]string{}}
	// Browsers ask for /favicon.ico on their own, signed in or not.
	ico := anon.request(t, http.MethodGet, "/favicon.ico", nil)
	require.Equal(t, http.StatusOK, ico.status)
	require.Equal(t, "image/svg+xml", ico.header.Get("Content-Type"))
	require.Equal(t, "nosniff", ico.header.Get("X-Content-Type-Options"))
	require.Contains(t, ico.body, "<svg")
	require.Contains(t, ico.body, "#e0462c", "the brand mark's colours")
	svg := anon.request(t, http.MethodGet, "/static/favicon.svg", nil)
	require.Equal(t, http.StatusOK, svg.status)
	require.Equal(t, ico.body, svg.body)
	// Both page shells link it.
	link := `<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">`
	require.Contains(t, anon.request(t, http.MethodGet, "/login", nil).body, link)
	require.Contains(t, b.request(t, http.MethodGet, "/", nil).body, link)
}
