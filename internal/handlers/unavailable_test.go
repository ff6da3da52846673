package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// TestDatabaseUnavailable cuts the database off under a running server
// (a proxy in front of the real one resets every connection and refuses
// new ones) and brings it back: the API answers 503 database_unavailable
// with Retry-After, never 500; readiness fails; the dashboard shows a
// banner instead of error pages and does not sign anyone out; and
// everything answers again once the database is back, without a restart.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	proxy, u := dbtest.NewProxy(t, dbtest.NewDatabase(t))
	store, err := db.Open(ctx, db.Config{URL: u, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	_, err = store.EnsureUser(ctx, adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	app := handlers.New(handlers.Config{
		APIKey: apiKey, Dashboard: store, Audit: store,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")},
	}, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b := &dashBundle{app: app, store: store, ctx: ctx, cookies: map[string]string{}, woken: &wakeLog{}}
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)

	ready := b.request(t, http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusOK, ready.status, ready.body)
	var r struct {
		Status string                `json:"status"`
		Server domain.DatabaseServer `json:"server"`
	}
	require.NoError(t, json.Unmarshal([]byte(ready.body), &r))
	require.Equal(t, "ready", r.Status)
	require.NotEmpty(t, r.Server.Address)
	require.False(t, r.Server.ReadOnly)

	proxy.Down()
	for _, path := range []string{"/api/v1/jobs", "/api/v1/stats", "/api/v1/dlq"} {
		p := b.request(t, http.MethodGet, path, nil, "X-API-Key", apiKey)
		require.Equal(t, http.StatusServiceUnavailable, p.status, "%s: %s", path, p.body)
		require.Equal(t, "5", p.header.Get("Retry-After"))
		require.Contains(t, p.body, `"code":"database_unavailable"`)
	}
	enq := b.postJSON(t, "/api/v1/jobs", `{"type":"noop"}`)
	require.Equal(t, http.StatusServiceUnavailable, enq.status, enq.body)
	require.Contains(t, enq.body, `"code":"database_unavailable"`)

	ready = b.request(t, http.MethodGet, "/readyz", nil)
	require.Equal(t, http.StatusServiceUnavailable, ready.status)
	require.Equal(t, "5", ready.header.Get("Retry-After"))

	for _, path := range []string{"/", "/jobs", "/workers"} {
		p := b.request(t, http.MethodGet, path, nil, "Accept", "text/html")
		require.Equal(t, http.StatusServiceUnavailable, p.status, "%s: %s", path, p.body)
		require.Contains(t, p.body, `data-testid="db-banner"`)
		require.Contains(t, p.body, "The database is unreachable")
		require.Contains(t, p.header.Get("Content-Type"), "text/html")
	}
	live := b.request(t, http.MethodGet, "/overview/live", nil, "HX-Request", "true")
	require.Equal(t, http.StatusServiceUnavailable, live.status)
	require.Equal(t, "unavailable", live.header.Get("X-Flint-Database"))

	proxy.Up()
	require.Eventually(t, func() bool { return b.request(t, http.MethodGet, "/readyz", nil).status == http.StatusOK },
		15*time.Second, 50*time.Millisecond, "readiness did not come back")
	home := b.request(t, http.MethodGet, "/", nil, "Accept", "text/html")
	require.Equal(t, http.StatusOK, home.status, "still signed in: %s", home.body[:min(200, len(home.body))])
	require.False(t, strings.Contains(home.body, "db-banner"))
	enq = b.postJSON(t, "/api/v1/jobs", `{"type":"noop"}`)
	require.Equal(t, http.StatusCreated, enq.status, enq.body)
}

// postJSON posts body to path with the API key.
func (b *dashBundle) postJSON(t *testing.T, path, body string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.app.Test(req, 30_000)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}
