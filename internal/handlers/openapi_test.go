package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// TestOpenAPIMatchesRoutes fails when the server has an API route the
// document lacks, or the document describes one the server does not have.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(handlers.OpenAPI())
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()), "the document is valid OpenAPI 3")

	// A server with every optional part switched on, so every route exists.
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	b := dashSetup(t)
	_ = b
	app := handlers.New(handlers.Config{
		APIKey: apiKey, Dashboard: b.store, Audit: b.store, Logs: nopLogs{}, Access: b.store, Alerts: b.store,
		Metrics:   http.NotFoundHandler(),
		Work:      &handlers.WorkConfig{Store: b.store},
		Benchmark: func(context.Context, int, string) ([]domain.BenchResult, error) { return nil, nil },
		Session:   handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")},
	}, b.store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))

	param := regexp.MustCompile(`:(\w+)`)
	served := map[string]bool{}
	for _, r := range app.GetRoutes(true) {
		if r.Method == http.MethodHead || r.Method == "USE" {
			continue
		}
		if !strings.HasPrefix(r.Path, "/api/v1/") && r.Path != "/healthz" && r.Path != "/readyz" && r.Path != "/metrics" {
			continue // the dashboard's HTML routes are not part of the API
		}
		served[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	var missing, stale []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	require.Empty(t, missing, "routes the OpenAPI document lacks")
	require.Empty(t, stale, "documented routes the server does not have")
	require.Greater(t, len(served), 30)
}

func TestAPIDocsPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/api/v1/docs", "/api/v1/openapi.json"} {
		req := httptest.NewRequest(http.MethodGet, path, nil) // no API key needed
		resp, err := b.app.Test(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		if path == "/api/v1/docs" {
			require.Contains(t, string(body), `data-testid="api-op"`)
			require.Contains(t, string(body), "POST /api/v1/workflows")
			require.NotContains(t, string(body), "<script")
		}
	}
}

// nopLogs is a LogSource with nothing in it.
type nopLogs struct{}

func (nopLogs) ReadLogs(context.Context, logsQuery) ([]logsEntry, string, error) { return nil, "", nil }
func (nopLogs) TailLogs(_ context.Context, _ logsQuery, after string, _ int) ([]logsEntry, string, bool, error) {
	return nil, after, false, nil
}
func (nopLogs) LogMark(context.Context) (string, error)                  { return "0.0", nil }
func (nopLogs) LogProcesses(context.Context, int) ([]logsProcess, error) { return nil, nil }
