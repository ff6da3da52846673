package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
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
	return dashSetupWith(t, nil)
}

// dashSetupWith is dashSetup with changes to the app's configuration.
func dashSetupWith(t *testing.T, change func(*handlers.Config)) *dashBundle {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	_, err := store.EnsureUser(ctx, adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	woken := &wakeLog{}
	cfg := handlers.Config{
		APIKey: apiKey, Dashboard: store, Wake: woken.wake, Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")},
		// The test requests' peer, as a proxy: X-Forwarded-For says where a
		// request comes from.
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/32")},
		Audit:          store,
		MailURL:        "http://localhost:8025",
		Benchmark: func(ctx context.Context, n int, alg string) ([]domain.BenchResult, error) {
			return []domain.BenchResult{{Algorithm: "heap", Size: n, Op: "insert", NsPerOp: 100}, {Algorithm: "timing_wheel", Size: n, Op: "insert", NsPerOp: 80}}, nil
		},
	}
	if change != nil {
		change(&cfg)
	}
	app := handlers.New(cfg, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
		if ck.MaxAge < 0 || (!ck.Expires.IsZero() && ck.Expires.Before(time.Now())) {
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

// loginFrom signs in as login does, from the client address addr (as a
// trusted proxy says).
func (b *dashBundle) loginFrom(t *testing.T, addr, email, password string, want int) page {
	t.Helper()
	lp := b.request(t, http.MethodGet, "/login", nil, "X-Forwarded-For", addr)
	require.Equal(t, http.StatusOK, lp.status)
	p := b.request(t, http.MethodPost, "/login", url.Values{"email": {email}, "password": {password}, "_csrf": {b.csrf}}, "X-Forwarded-For", addr)
	require.Equal(t, want, p.status, "from %s: %s", addr, p.body)
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

// TestSeriesRunsList: a recurring series links from the Recurring page to
// the list of its runs, which holds its jobs and no others; a series id
// that is not one says so.
func TestSeriesRunsList(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	series := b.enqueue(t, jobs.EnqueueParams{Type: "noop", IntervalSeconds: 3600})
	other := b.enqueue(t, jobs.EnqueueParams{Type: "noop", IntervalSeconds: 7200})
	loose := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series.ScheduleID.String()+"/run", nil, "recurring-table").status)

	p := b.request(t, http.MethodGet, "/recurring", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `href="/jobs?series=`+series.ScheduleID.String()+`"`)

	p = b.request(t, http.MethodGet, "/jobs?series="+series.ScheduleID.String(), nil)
	require.Equal(t, http.StatusOK, p.status)
	runs, err := b.store.ListJobs(b.ctx, domain.ListParams{ScheduleID: series.ScheduleID})
	require.NoError(t, err)
	require.Len(t, runs.Jobs, 2, "the pending run and the one run now")
	for _, j := range runs.Jobs {
		require.Contains(t, p.body, `data-job-id="`+j.ID.String()+`"`)
	}
	require.NotContains(t, p.body, `data-job-id="`+other.ID.String()+`"`)
	require.NotContains(t, p.body, `data-job-id="`+loose.ID.String()+`"`)
	require.Contains(t, p.body, `data-testid="filter-series"`)

	p = b.request(t, http.MethodGet, "/jobs?series=nightly", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "Unknown recurring series &#34;nightly&#34;")
}

// TestOverviewChartRanges: the throughput chart shows the last hour, 6
// hours, 24 hours or 2 days, its live part keeping the range; a range it
// does not have is said, and the last hour shown.
func TestOverviewChartRanges(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	// Runs that finished three hours ago: outside the hour, inside 6 hours.
	_, err := b.store.Pool().Exec(b.ctx, `INSERT INTO job_throughput (bucket, outcome, n)
		VALUES (date_trunc('minute', now()) - interval '3 hours', 'succeeded', 7)`)
	require.NoError(t, err)

	p := b.request(t, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "Throughput, last hour")
	require.Contains(t, p.body, `data-range="1h" data-bars="60"`)
	require.Contains(t, p.body, `succeeded (0)`)

	p = b.request(t, http.MethodGet, "/?range=6h", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "Throughput, last 6 hours")
	require.Contains(t, p.body, `data-range="6h" data-bars="72"`)
	require.Contains(t, p.body, `succeeded (7)`)
	require.Contains(t, p.body, `data-live-url="/overview/live?range=6h"`)
	require.Contains(t, p.body, `7 succeeded`, "the bar of three hours ago")

	p = b.hx(t, http.MethodGet, "/overview/live?range=24h", nil, "overview-live")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `data-range="24h" data-bars="96"`)

	p = b.request(t, http.MethodGet, "/?range=1y", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `data-testid="range-error"`)
	require.Contains(t, p.body, "give 1h, 6h, 24h or 48h")
	require.Contains(t, p.body, `data-range="1h"`)
}
