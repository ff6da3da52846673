package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"flint/db/dbtest"
	"flint/handlers"
	"flint/jobs"
	"flint/logs"
)

// TestLogSecretsNeverShown logs secrets in every place the scrubber covers
// and reads them back through the log API, the Logs page and its live tail:
// none may appear.
func TestLogSecretsNeverShown(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	lg, err := logs.New(logs.Config{File: filepath.Join(t.TempDir(), "flint.log"), Stdout: io.Discard, Level: "debug"})
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	_, err = store.EnsureUser(context.Background(), adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app := handlers.New(handlers.Config{APIKey: apiKey, Dashboard: store, Logs: lg, BaseContext: ctx,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))

	b := &dashBundle{app: app, store: store, ctx: context.Background(), cookies: map[string]string{}}
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)

	// The page marks where its live tail starts.
	first := b.request(t, http.MethodGet, "/logs?q=probe", nil)
	require.Equal(t, http.StatusOK, first.status)
	m := regexp.MustCompile(`data-seq="(\d+)"`).FindStringSubmatch(first.body)
	require.NotNil(t, m, "the first page of logs updates live")
	require.Contains(t, first.body, `data-live-logs="/logs/tail?q=probe"`)

	secrets := []string{"s3cr3t-pass", "tok-abc123", "smtp-pw-777", "cookie-val-9", "payload-secret-42"}
	logger := lg.Slog()
	logger.Info("probe login", "password", secrets[0], "api_key", secrets[1])
	logger.Warn("probe smtp", "error", "dial smtp://flint:"+secrets[2]+"@mail.example:25 failed")
	logger.Info("probe header", "authorization", "Bearer "+secrets[1], "cookie", secrets[3])
	logger.Info("probe payload", "payload", []byte(`{"user":"x","password":"`+secrets[4]+`"}`))

	// The live tail: the rows the page adds, fetched after its mark.
	tail := b.request(t, http.MethodGet, "/logs/tail?q=probe&after="+m[1], nil, "HX-Request", "true")
	require.Equal(t, http.StatusOK, tail.status)
	require.Equal(t, 4, strings.Count(tail.body, `data-testid="log-row"`), tail.body)
	require.Less(t, strings.Index(tail.body, "probe payload"), strings.Index(tail.body, "probe login"), "newest first")
	seq, err := strconv.Atoi(tail.header.Get("X-Log-Seq"))
	require.NoError(t, err)
	again := b.request(t, http.MethodGet, "/logs/tail?q=probe&after="+strconv.Itoa(seq), nil, "HX-Request", "true")
	require.Equal(t, http.StatusOK, again.status)
	require.NotContains(t, again.body, "log-row", "nothing new since the last fetch")
	bad := b.request(t, http.MethodGet, "/logs/tail?after=soon", nil, "HX-Request", "true")
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Contains(t, bad.body, "after")

	// The API.
	api := b.request(t, http.MethodGet, "/api/v1/logs?q=probe", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, api.status)
	require.Contains(t, api.body, "probe login")
	require.Contains(t, api.body, logs.Redacted)
	// The page.
	page := b.request(t, http.MethodGet, "/logs?q=probe", nil)
	require.Contains(t, page.body, "probe smtp")
	for _, s := range secrets {
		require.NotContains(t, tail.body, s, "live tail")
		require.NotContains(t, api.body, s, "log API")
		require.NotContains(t, page.body, s, "Logs page")
	}
}
