package handlers_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"flint/db/dbtest"
	"flint/handlers"
	"flint/jobs"
	"flint/logs"
)

// TestLogSecretsNeverShown logs secrets in every place the scrubber covers
// and reads them back through the log API and the live tail's SSE stream:
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(time.Second) })
	base := "http://" + ln.Addr().String()

	b := &dashBundle{app: app, store: store, ctx: context.Background(), cookies: map[string]string{}}
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)

	// Subscribe to the live tail before logging.
	req, _ := http.NewRequest(http.MethodGet, base+"/logs/stream?q=probe", nil)
	for k, v := range b.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(200 * time.Millisecond)

	secrets := []string{"s3cr3t-pass", "tok-abc123", "smtp-pw-777", "cookie-val-9", "payload-secret-42"}
	logger := lg.Slog()
	logger.Info("probe login", "password", secrets[0], "api_key", secrets[1])
	logger.Warn("probe smtp", "error", "dial smtp://flint:"+secrets[2]+"@mail.example:25 failed")
	logger.Info("probe header", "authorization", "Bearer "+secrets[1], "cookie", secrets[3])
	logger.Info("probe payload", "payload", []byte(`{"user":"x","password":"`+secrets[4]+`"}`))

	// The SSE tail.
	var streamed strings.Builder
	deadline := time.After(5 * time.Second)
	for n := 0; n < 4; {
		select {
		case l, ok := <-lines:
			require.True(t, ok)
			streamed.WriteString(l + "\n")
			if strings.HasPrefix(l, "event: log") {
				n++
			}
		case <-deadline:
			t.Fatalf("only %q arrived", streamed.String())
		}
	}
	// The API.
	api := b.request(t, http.MethodGet, "/api/v1/logs?q=probe", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, api.status)
	require.Contains(t, api.body, "probe login")
	require.Contains(t, api.body, logs.Redacted)
	// The page.
	page := b.request(t, http.MethodGet, "/logs?q=probe", nil)
	require.Contains(t, page.body, "probe smtp")
	for _, s := range secrets {
		require.NotContains(t, streamed.String(), s, "SSE tail")
		require.NotContains(t, api.body, s, "log API")
		require.NotContains(t, page.body, s, "Logs page")
	}
}
