package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

const apiKey = "test-api-key-0123456789"

type testBundle struct {
	app   *fiber.App
	store *db.Store
	ctx   context.Context
	dsn   string // the test database, for writing rows as older versions did
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	store, dsn := dbtest.NewStore(t)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	app := handlers.New(handlers.Config{APIKey: apiKey}, store, reg, logger)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &testBundle{app: app, store: store, ctx: ctx, dsn: dsn}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (b *testBundle) do(t *testing.T, method, path, contentType, body string, headers ...string) response {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-API-Key", apiKey)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.app.Test(req, 30_000)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func (b *testBundle) post(t *testing.T, path, body string) response {
	t.Helper()
	return b.do(t, http.MethodPost, path, "application/json", body)
}

func TestEnqueueAndInspect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post(t, "/api/v1/jobs", `{"type":"sleep","payload":{"ms":5},"priority":"low","queue":"mail","max_retries":1,"timeout_seconds":30,"idempotency_key":"k1"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	job := r.json(t)
	require.Equal(t, "sleep", job["type"])
	require.Equal(t, "mail", job["queue"])
	require.Equal(t, float64(3), job["priority"])
	require.Equal(t, "queued", job["status"])
	require.Equal(t, map[string]any{"ms": float64(5)}, job["payload"])
	require.NotContains(t, string(r.body), "lease_token")
	id := job["id"].(string)

	again := b.post(t, "/api/v1/jobs", `{"type":"sleep","payload":{"ms":5},"idempotency_key":"k1"}`)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, id, again.json(t)["id"])

	d := b.do(t, http.MethodGet, "/api/v1/jobs/"+id, "", "")
	require.Equal(t, http.StatusOK, d.status)
	detail := d.json(t)
	require.Equal(t, id, detail["id"])
	require.Equal(t, []any{}, detail["executions"])

	delayed := b.post(t, "/api/v1/jobs", `{"type":"noop","delay_seconds":3600}`)
	require.Equal(t, http.StatusCreated, delayed.status)
	require.Equal(t, "scheduled", delayed.json(t)["status"])
	at := b.post(t, "/api/v1/jobs", `{"type":"noop","run_at":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`)
	require.Equal(t, "scheduled", at.json(t)["status"])

	list := b.do(t, http.MethodGet, "/api/v1/jobs?status=scheduled&limit=1", "", "")
	require.Equal(t, http.StatusOK, list.status)
	l := list.json(t)
	require.Len(t, l["jobs"], 1)
	require.NotNil(t, l["next_cursor"])
	next := b.do(t, http.MethodGet, "/api/v1/jobs?status=scheduled&limit=1&cursor="+l["next_cursor"].(string), "", "")
	nl := next.json(t)
	require.Len(t, nl["jobs"], 1)
	require.Nil(t, nl["next_cursor"])
	require.NotEqual(t, l["jobs"].([]any)[0].(map[string]any)["id"], nl["jobs"].([]any)[0].(map[string]any)["id"])

	st := b.do(t, http.MethodGet, "/api/v1/stats", "", "")
	require.Equal(t, http.StatusOK, st.status)
	require.Equal(t, float64(1), st.json(t)["by_status"].(map[string]any)["queued"])
}

func TestBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post(t, "/api/v1/jobs/batch", `{"jobs":[{"type":"noop"},{"type":"sleep","payload":{"ms":1},"priority":1},{"type":"noop","idempotency_key":"x"},{"type":"noop","idempotency_key":"x"}]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	out := r.json(t)["jobs"].([]any)
	require.Len(t, out, 4)
	require.Equal(t, out[2].(map[string]any)["id"], out[3].(map[string]any)["id"])

	// All or nothing: one bad entry, nothing inserted.
	bad := b.post(t, "/api/v1/jobs/batch", `{"jobs":[{"type":"noop","queue":"all-or-nothing"},{"type":"nope"}]}`)
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Queue: "all-or-nothing"})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
}

func TestLifecycleActions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.post(t, "/api/v1/jobs", `{"type":"noop"}`).json(t)["id"].(string)

	r := b.post(t, "/api/v1/jobs/"+id+"/retry", ``)
	require.Equal(t, http.StatusConflict, r.status, "a queued job cannot be retried")
	require.Contains(t, r.json(t)["error"].(map[string]any)["message"], "queued")

	r = b.post(t, "/api/v1/jobs/"+id+"/cancel", ``)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "cancelled", r.json(t)["status"])
	require.Equal(t, http.StatusConflict, b.post(t, "/api/v1/jobs/"+id+"/cancel", ``).status)

	r = b.do(t, http.MethodDelete, "/api/v1/jobs/"+id, "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.NotNil(t, r.json(t)["deleted_at"])
	bin := b.do(t, http.MethodGet, "/api/v1/bin", "", "").json(t)
	require.Len(t, bin["jobs"], 1)
	require.Empty(t, b.do(t, http.MethodGet, "/api/v1/jobs", "", "").json(t)["jobs"])

	r = b.post(t, "/api/v1/jobs/"+id+"/restore", ``)
	require.Equal(t, http.StatusOK, r.status)
	require.Nil(t, r.json(t)["deleted_at"])
	require.Equal(t, http.StatusConflict, b.do(t, http.MethodDelete, "/api/v1/jobs/"+id+"?purge=true", "", "").status, "purge only from the bin")
	b.do(t, http.MethodDelete, "/api/v1/jobs/"+id, "", "")
	r = b.do(t, http.MethodDelete, "/api/v1/jobs/"+id+"?purge=true", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/api/v1/jobs/"+id, "", "").status)
}

func TestDLQReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := range 3 {
		id := b.post(t, "/api/v1/jobs", fmt.Sprintf(`{"type":"noop","max_retries":0,"queue":"q%d"}`, i)).json(t)["id"].(string)
		ids = append(ids, id)
	}
	// Run and fail each once: straight to the DLQ.
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 10, LeaseTTL: time.Minute})
	require.NoError(t, err)
	var fins []domain.Finish
	for _, j := range claimed {
		fins = append(fins, domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeFailed, Error: "<script>alert(1)</script>"})
	}
	_, _, err = b.store.FinishJobs(b.ctx, fins)
	require.NoError(t, err)

	dlq := b.do(t, http.MethodGet, "/api/v1/dlq", "", "")
	require.Equal(t, http.StatusOK, dlq.status)
	require.Len(t, dlq.json(t)["jobs"], 3)
	require.NotContains(t, string(dlq.body), "<script>", "JSON escapes markup")

	one := b.post(t, "/api/v1/dlq/retry", `{"ids":["`+ids[0]+`"]}`)
	require.Equal(t, http.StatusOK, one.status)
	require.Equal(t, float64(1), one.json(t)["replayed"])
	all := b.do(t, http.MethodPost, "/api/v1/dlq/retry", "", "")
	require.Equal(t, http.StatusOK, all.status, "%s", all.body)
	require.Equal(t, float64(2), all.json(t)["replayed"])
	require.Empty(t, b.do(t, http.MethodGet, "/api/v1/dlq", "", "").json(t)["jobs"])
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		req := httptest.NewRequest(http.MethodGet, p, nil) // no API key needed
		resp, err := b.app.Test(req)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp.Body.Close()
	}
}

// TestBodyTooLarge goes through a real listener: the server refuses a body
// whose declared length is over the limit before reading it, so the test
// speaks HTTP by hand and never sends the body.
func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.app.Listener(ln) }()
	t.Cleanup(func() { _ = b.app.Shutdown() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"X-API-Key: %s\r\nContent-Length: %d\r\n\r\n{", apiKey, 17<<20)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "payload_too_large")
}

// TestRunAtBoundsFollowTheClock: run_at limits are judged on the server's
// clock, here a fake one set far in the future.
func TestRunAtBoundsFollowTheClock(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	clock := jobs.NewFakeClock(time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC))
	app := handlers.New(handlers.Config{APIKey: apiKey, Clock: clock}, store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b := &testBundle{app: app, store: store, ctx: context.Background()}
	ok := b.post(t, "/api/v1/jobs", `{"type":"noop","run_at":"2049-06-01T00:00:00Z"}`)
	require.Equal(t, http.StatusCreated, ok.status, "%s", ok.body)
	require.Equal(t, "scheduled", ok.json(t)["status"])
	clock.Advance(-20 * 365 * 24 * time.Hour)
	tooFar := b.post(t, "/api/v1/jobs", `{"type":"noop","run_at":"2049-06-01T00:00:00Z"}`)
	require.Equal(t, http.StatusUnprocessableEntity, tooFar.status)
}

type uuidT = uuid.UUID

func uuidNew() string { return uuid.NewString() }

func uuidMust(s string) uuid.UUID { return uuid.MustParse(s) }

type (
	logsQuery   = logs.Query
	logsEntry   = logs.Entry
	logsProcess = logs.SeenProcess
)
