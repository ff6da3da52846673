package client_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/client"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

const apiKey = "client-test-api-key-0123456789"

// TestClientRoundTrip runs the generated client against a real Flint API:
// enqueue a job, read it back, list it, and get a validation error as the
// typed error it is documented to be.
func TestClientRoundTrip(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	app := handlers.New(handlers.Config{APIKey: apiKey}, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(time.Second) })

	ctx := context.Background()
	c, err := client.NewClientWithResponses("http://"+ln.Addr().String(), client.WithRequestEditorFn(
		func(_ context.Context, req *http.Request) error { req.Header.Set("X-API-Key", apiKey); return nil }))
	require.NoError(t, err)

	queue := "reports"
	payload := map[string]any{"ms": 5}
	created, err := c.EnqueueJobWithResponse(ctx, client.EnqueueJobJSONRequestBody{Type: "sleep", Queue: &queue, Payload: &payload})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, created.StatusCode(), string(created.Body))
	require.NotNil(t, created.JSON201)
	id := *created.JSON201.Id
	require.Equal(t, client.JobStatus("queued"), *created.JSON201.Status)

	got, err := c.GetJobWithResponse(ctx, id)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, got.StatusCode())
	require.Equal(t, id, *got.JSON200.Id)
	require.Equal(t, "reports", *got.JSON200.Queue)

	list, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{Queue: &queue})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, list.StatusCode(), string(list.Body))
	require.Len(t, *list.JSON200.Jobs, 1)

	bad, err := c.EnqueueJobWithResponse(ctx, client.EnqueueJobJSONRequestBody{Type: ""})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, bad.StatusCode())
	require.NotNil(t, bad.JSON422)
	require.Equal(t, "type", *bad.JSON422.Error.Field)
}

// TestClientIsGeneratedFromTheDocument regenerates the client from
// handlers/openapi.json and compares: a document changed without
// `go generate ./client` fails here.
func TestClientIsGeneratedFromTheDocument(t *testing.T) {
	t.Parallel()
	tool, err := exec.Command("go", "tool", "-n", "oapi-codegen").Output()
	require.NoError(t, err)
	dir := t.TempDir()
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o644))
	spec, err := filepath.Abs("../internal/handlers/openapi.json")
	require.NoError(t, err)
	cmd := exec.Command(strings.TrimSpace(string(tool)), "-config", "oapi-codegen.yaml", spec)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	fresh, err := os.ReadFile(filepath.Join(dir, "client.gen.go"))
	require.NoError(t, err)
	committed, err := os.ReadFile("client.gen.go")
	require.NoError(t, err)
	require.True(t, string(fresh) == string(committed), "client.gen.go is stale: run go generate ./client")
}
