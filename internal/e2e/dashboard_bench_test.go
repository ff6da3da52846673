package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkDashboardPages renders every dashboard page, and the API's
// busiest reads, against a table of a million jobs and reports the
// server-side p50/p95 per page:
//
//	make bench BENCH=DashboardPages BENCHPKG=.
//
// Loading the million rows takes a minute; it happens once. With
// FLINT_BENCH_DATABASE_URL it reads that database as it is instead (one
// filled by "flint bench history", say), after migrating it:
//
//	FLINT_BENCH_DATABASE_URL=postgres://…/history make bench BENCH=DashboardPages BENCHPKG=.
func BenchmarkDashboardPages(b *testing.B) {
	ctx := context.Background()
	store := dashboardBenchStore(b, ctx)
	_, err := store.EnsureUser(ctx, "ops@example.com", "bench-password", "admin")
	if err != nil {
		b.Fatal(err)
	}
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	app := handlers.New(handlers.Config{APIKey: "bench-api-key-0123456789", Dashboard: store,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	cookies := login(b, app)

	// A completed job 5,000 from the newest and a dead-letter one, live or
	// in the history, and the type and queue of the latter for the
	// filtered lists.
	var someID, deadID, deadType, deadQueue string
	if err := store.Pool().QueryRow(ctx, `SELECT id::text FROM (
		(SELECT id FROM jobs WHERE status = 'completed' ORDER BY id DESC LIMIT 5001)
		UNION ALL (SELECT id FROM job_history WHERE status = 'completed' ORDER BY id DESC LIMIT 5001)
		ORDER BY id DESC LIMIT 1 OFFSET 5000) x`).Scan(&someID); err != nil {
		b.Fatal(err)
	}
	if err := store.Pool().QueryRow(ctx, `(SELECT id::text, type, queue FROM jobs WHERE status = 'dead_letter' LIMIT 1)
		UNION ALL (SELECT id::text, type, queue FROM job_history WHERE status = 'dead_letter' LIMIT 1) LIMIT 1`).
		Scan(&deadID, &deadType, &deadQueue); err != nil {
		b.Fatal(err)
	}
	pages := []string{
		"/", "/overview/live", "/jobs", "/jobs?status=queued", "/jobs?status=dead_letter&type=" + deadType,
		"/jobs?type=" + deadType, "/jobs?queue=" + deadQueue, "/jobs?q=" + someID, "/jobs/" + someID, "/jobs/" + deadID,
		// Text search: a term in many errors, one in none, a type's start.
		"/jobs?q=permanent", "/jobs?q=no-such-text-anywhere", "/jobs?q=" + deadType[:3],
		"/dlq", "/bin", "/recurring", "/workers", "/settings", "/jobs/new", "/queues",
		"/api/v1/jobs?status=completed", "/api/v1/stats",
		// The API's text search: a whole type, a term in many errors, a
		// term in no job.
		"/api/v1/jobs?limit=50&q=" + deadType, "/api/v1/jobs?limit=50&q=permanent", "/api/v1/jobs?limit=50&q=no-such-text-anywhere",
	}
	b.ResetTimer()
	for _, p := range pages {
		b.Run(strings.NewReplacer("/", "_", "?", "_", "=", "-", "&", "_").Replace(p), func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, p, nil)
				if strings.HasPrefix(p, "/api/") {
					req.Header.Set("X-API-Key", "bench-api-key-0123456789")
				} else {
					for _, c := range cookies {
						req.AddCookie(c)
					}
				}
				start := time.Now()
				resp, err := app.Test(req, 60_000)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(start))
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", p, resp.StatusCode)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}

// dashboardBenchStore opens the database FLINT_BENCH_DATABASE_URL names,
// migrated, or else a new one with a million jobs.
func dashboardBenchStore(b *testing.B, ctx context.Context) *db.Store {
	u := os.Getenv("FLINT_BENCH_DATABASE_URL")
	if u == "" {
		store, _ := dbtest.NewStore(b)
		seed1M(b, store)
		return store
	}
	if err := db.Migrate(ctx, u, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		b.Fatal(err)
	}
	store, err := db.Open(ctx, db.Config{URL: u})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(store.Close)
	return store
}

// seed1M loads a million jobs shaped like a busy installation: mostly
// finished, some queued, scheduled, failed and binned, over five types
// and three queues, with UUIDv7-style ids in creation order.
func seed1M(b *testing.B, store *db.Store) {
	b.Helper()
	ctx := context.Background()
	_, err := store.Pool().Exec(ctx, `
INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, attempt, run_at, created_at, finished_at, last_error, deleted_at)
SELECT (lpad(to_hex((extract(epoch FROM ts) * 1000)::bigint), 12, '0') || '7' || substr(md5(i::text), 1, 3) || '8' || substr(md5(i::text), 4, 15))::uuid,
       (ARRAY['noop','sleep','http_request','send_email','report.build'])[1 + i % 5],
       (ARRAY['default','mail','reports'])[1 + i % 3], '{"n":1}', 1 + i % 3, 1 + i % 3,
       CASE WHEN i % 20 = 0 THEN 'queued' WHEN i % 33 = 0 THEN 'scheduled' WHEN i % 101 = 0 THEN 'dead_letter'
            WHEN i % 97 = 0 THEN 'cancelled' ELSE 'completed' END,
       1, ts + CASE WHEN i % 33 = 0 AND i % 20 <> 0 THEN interval '1 day' ELSE interval '0' END, ts,
       CASE WHEN i % 20 <> 0 AND i % 33 <> 0 THEN ts + interval '1 second' END,
       CASE WHEN i % 101 = 0 THEN 'connection refused by upstream' END,
       CASE WHEN i % 211 = 0 THEN ts + interval '2 seconds' END
FROM generate_series(1, 1000000) i, LATERAL (SELECT now() - (1000000 - i) * interval '1 second' AS ts) t`)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := store.Pool().Exec(ctx, `
INSERT INTO job_executions (job_id, seq, attempt, worker_id, started_at, finished_at, outcome, error, duration_ms)
SELECT id, 1, 1, 'bench', created_at, finished_at, 'failed', last_error, 1000 FROM jobs WHERE status = 'dead_letter'`); err != nil {
		b.Fatal(err)
	}
	var n int
	if err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 1_000_000 {
		b.Fatalf("seeded %d jobs (%v)", n, err)
	}
	if _, err := store.Pool().Exec(ctx, `VACUUM ANALYZE jobs`); err != nil {
		b.Fatal(err)
	}
	if _, err := store.Pool().Exec(ctx, `VACUUM ANALYZE job_executions`); err != nil {
		b.Fatal(err)
	}
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// login signs in through the form and returns the session cookies.
func login(b *testing.B, app interface {
	Test(*http.Request, ...int) (*http.Response, error)
}) []*http.Cookie {
	b.Helper()
	resp, err := app.Test(httptest.NewRequest(http.MethodGet, "/login", nil))
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	m := csrfRe.FindStringSubmatch(string(body))
	form := url.Values{"email": {"ops@example.com"}, "password": {"bench-password"}, "_csrf": {m[1]}}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	resp, err = app.Test(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("login: %d", resp.StatusCode)
	}
	return resp.Cookies()
}
