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

	"flint/db"
	"flint/db/dbtest"
	"flint/handlers"
	"flint/jobs"
	"flint/logs"
)

const apiKey = "test-api-key-0123456789"

type testBundle struct {
	app   *fiber.App
	store *db.Store
	ctx   context.Context
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	reg := jobs.NewRegistry()
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	app := handlers.New(handlers.Config{APIKey: apiKey}, store, reg, logger)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &testBundle{app: app, store: store, ctx: ctx}
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

// TestMalformedRequests: every bad request gets the right 4xx and a JSON
// error that names what to fix, never a 5xx.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `{"type":"noop","payload":{"x":"` + strings.Repeat("a", jobs.MaxPayloadBytes) + `"}}`
	many := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"type":"noop"},`, handlers.MaxBatch+1), ",") + `]}`
	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		noKey       bool
		wantStatus  int
		wantCode    string
		wantField   string
	}{
		{name: "no api key", path: "/api/v1/jobs", body: `{"type":"noop"}`, noKey: true, wantStatus: 401, wantCode: "unauthorized"},
		{name: "wrong content type", path: "/api/v1/jobs", contentType: "text/plain", body: `{"type":"noop"}`, wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "form content type", path: "/api/v1/jobs", contentType: "application/x-www-form-urlencoded", body: `type=noop`, wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "empty body", path: "/api/v1/jobs", contentType: "application/json", body: ``, wantStatus: 400, wantCode: "invalid_json"},
		{name: "malformed json", path: "/api/v1/jobs", body: `{"type":`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "syntax error", path: "/api/v1/jobs", body: `{"type" "noop"}`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "array instead of object", path: "/api/v1/jobs", body: `[{"type":"noop"}]`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "trailing data", path: "/api/v1/jobs", body: `{"type":"noop"} {"type":"noop"}`, wantStatus: 400, wantCode: "invalid_json"},
		{name: "unknown field", path: "/api/v1/jobs", body: `{"type":"noop","prio":1}`, wantStatus: 422, wantField: "prio"},
		{name: "missing type", path: "/api/v1/jobs", body: `{}`, wantStatus: 422, wantField: "type"},
		{name: "unknown type", path: "/api/v1/jobs", body: `{"type":"rm_rf"}`, wantStatus: 422, wantField: "type"},
		{name: "type with NUL", path: "/api/v1/jobs", body: `{"type":"no\u0000op"}`, wantStatus: 422, wantField: "type"},
		{name: "type wrong kind", path: "/api/v1/jobs", body: `{"type":5}`, wantStatus: 422, wantField: "type"},
		{name: "payload not object", path: "/api/v1/jobs", body: `{"type":"noop","payload":[1]}`, wantStatus: 422, wantField: "payload"},
		{name: "payload with NUL", path: "/api/v1/jobs", body: `{"type":"noop","payload":{"a":"x\u0000y"}}`, wantStatus: 422, wantField: "payload"},
		{name: "payload key with NUL", path: "/api/v1/jobs", body: `{"type":"noop","payload":{"a\u0000":1}}`, wantStatus: 422, wantField: "payload"},
		{name: "payload too large", path: "/api/v1/jobs", body: big, wantStatus: 422, wantField: "payload"},
		{name: "bad sleep payload", path: "/api/v1/jobs", body: `{"type":"sleep","payload":{"ms":-1}}`, wantStatus: 422, wantField: "payload"},
		{name: "sleep payload unknown field", path: "/api/v1/jobs", body: `{"type":"sleep","payload":{"ms":1,"x":2}}`, wantStatus: 422, wantField: "payload"},
		{name: "priority out of range", path: "/api/v1/jobs", body: `{"type":"noop","priority":7}`, wantStatus: 422, wantField: "priority"},
		{name: "priority unknown name", path: "/api/v1/jobs", body: `{"type":"noop","priority":"urgent"}`, wantStatus: 422, wantField: "priority"},
		{name: "priority float", path: "/api/v1/jobs", body: `{"type":"noop","priority":1.5}`, wantStatus: 422, wantField: "priority"},
		{name: "priority bool", path: "/api/v1/jobs", body: `{"type":"noop","priority":true}`, wantStatus: 422, wantField: "priority"},
		{name: "max_retries absurd", path: "/api/v1/jobs", body: `{"type":"noop","max_retries":1e308}`, wantStatus: 422, wantField: "max_retries"},
		{name: "max_retries negative", path: "/api/v1/jobs", body: `{"type":"noop","max_retries":-1}`, wantStatus: 422, wantField: "max_retries"},
		{name: "max_retries huge", path: "/api/v1/jobs", body: `{"type":"noop","max_retries":100000}`, wantStatus: 422, wantField: "max_retries"},
		{name: "timeout zero", path: "/api/v1/jobs", body: `{"type":"noop","timeout_seconds":0}`, wantStatus: 422, wantField: "timeout_seconds"},
		{name: "timeout huge", path: "/api/v1/jobs", body: `{"type":"noop","timeout_seconds":99999999999}`, wantStatus: 422, wantField: "timeout_seconds"},
		{name: "delay negative", path: "/api/v1/jobs", body: `{"type":"noop","delay_seconds":-5}`, wantStatus: 422, wantField: "delay_seconds"},
		{name: "delay absurd", path: "/api/v1/jobs", body: `{"type":"noop","delay_seconds":1e300}`, wantStatus: 422, wantField: "delay_seconds"},
		{name: "run_at not a date", path: "/api/v1/jobs", body: `{"type":"noop","run_at":"tomorrow"}`, wantStatus: 422, wantField: "run_at"},
		{name: "run_at year 9999", path: "/api/v1/jobs", body: `{"type":"noop","run_at":"9999-12-31T23:59:59Z"}`, wantStatus: 422, wantField: "run_at"},
		{name: "run_at year 1", path: "/api/v1/jobs", body: `{"type":"noop","run_at":"0001-01-01T00:00:00Z"}`, wantStatus: 422, wantField: "run_at"},
		{name: "run_at and delay", path: "/api/v1/jobs", body: `{"type":"noop","run_at":"2030-01-01T00:00:00Z","delay_seconds":5}`, wantStatus: 422, wantField: "run_at"},
		{name: "queue invalid", path: "/api/v1/jobs", body: `{"type":"noop","queue":"a b"}`, wantStatus: 422, wantField: "queue"},
		{name: "queue too long", path: "/api/v1/jobs", body: `{"type":"noop","queue":"` + strings.Repeat("q", 65) + `"}`, wantStatus: 422, wantField: "queue"},
		{name: "idempotency key empty", path: "/api/v1/jobs", body: `{"type":"noop","idempotency_key":""}`, wantStatus: 422, wantField: "idempotency_key"},
		{name: "idempotency key control chars", path: "/api/v1/jobs", body: `{"type":"noop","idempotency_key":"a\nb"}`, wantStatus: 422, wantField: "idempotency_key"},
		{name: "idempotency key too long", path: "/api/v1/jobs", body: `{"type":"noop","idempotency_key":"` + strings.Repeat("k", 256) + `"}`, wantStatus: 422, wantField: "idempotency_key"},
		{name: "batch empty", path: "/api/v1/jobs/batch", body: `{"jobs":[]}`, wantStatus: 422, wantField: "jobs"},
		{name: "batch missing", path: "/api/v1/jobs/batch", body: `{}`, wantStatus: 422, wantField: "jobs"},
		{name: "batch bad entry", path: "/api/v1/jobs/batch", body: `{"jobs":[{"type":"noop"},{"type":"noop","priority":9}]}`, wantStatus: 422, wantField: "jobs[1].priority"},
		{name: "batch entry not object", path: "/api/v1/jobs/batch", body: `{"jobs":[{"type":"noop"},5]}`, wantStatus: 400, wantField: "jobs[1]"},
		{name: "batch too many", path: "/api/v1/jobs/batch", body: many, wantStatus: 422, wantField: "jobs"},
		{name: "get bad id", method: "GET", path: "/api/v1/jobs/not-a-uuid", wantStatus: 400, wantField: "id"},
		{name: "get unknown id", method: "GET", path: "/api/v1/jobs/" + uuid.NewString(), wantStatus: 404, wantCode: "not_found"},
		{name: "cancel unknown", path: "/api/v1/jobs/" + uuid.NewString() + "/cancel", wantStatus: 404, wantCode: "not_found"},
		{name: "retry bad id", path: "/api/v1/jobs/%00/retry", wantStatus: 400, wantField: "id"},
		{name: "list bad status", method: "GET", path: "/api/v1/jobs?status=claimed", wantStatus: 422, wantField: "status"},
		{name: "list bad limit", method: "GET", path: "/api/v1/jobs?limit=100000", wantStatus: 422, wantField: "limit"},
		{name: "list negative limit", method: "GET", path: "/api/v1/jobs?limit=-1", wantStatus: 422, wantField: "limit"},
		{name: "list bad cursor", method: "GET", path: "/api/v1/jobs?cursor=%%%", wantStatus: 422, wantField: "cursor"},
		{name: "list NUL in q", method: "GET", path: "/api/v1/jobs?q=a%00b", wantStatus: 422, wantField: "q"},
		{name: "list NUL in type", method: "GET", path: "/api/v1/jobs?type=%00", wantStatus: 422, wantField: "type"},
		{name: "list invalid utf8", method: "GET", path: "/api/v1/jobs?q=%ff%fe", wantStatus: 422, wantField: "q"},
		{name: "delete bad purge", method: "DELETE", path: "/api/v1/jobs/" + uuid.NewString() + "?purge=maybe", wantStatus: 422, wantField: "purge"},
		{name: "dlq retry bad id", path: "/api/v1/dlq/retry", body: `{"ids":["nope"]}`, wantStatus: 422, wantField: "ids[0]"},
		{name: "dlq retry empty ids", path: "/api/v1/dlq/retry", body: `{"ids":[]}`, wantStatus: 422, wantField: "ids"},
		{name: "dlq status filter", method: "GET", path: "/api/v1/dlq?status=queued", wantStatus: 422, wantField: "status"},
		{name: "unknown route", method: "GET", path: "/api/v1/nope", wantStatus: 404, wantCode: "not_found"},
		{name: "wrong method", method: "PUT", path: "/api/v1/jobs", body: `{}`, wantStatus: 405, wantCode: "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			ct := tc.contentType
			if ct == "" && tc.body != "" {
				ct = "application/json"
			}
			var r response
			if tc.noKey {
				req := httptest.NewRequest(method, tc.path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", ct)
				resp, err := b.app.Test(req, 30_000)
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r = response{status: resp.StatusCode, body: body}
			} else {
				r = b.do(t, method, tc.path, ct, tc.body)
			}
			require.Equal(t, tc.wantStatus, r.status, "body: %.300s", r.body)
			var e struct {
				Error struct {
					Code, Message, Field string
				}
			}
			require.NoError(t, json.Unmarshal(r.body, &e), "a JSON error body: %.300s", r.body)
			require.NotEmpty(t, e.Error.Message)
			if tc.wantCode != "" {
				require.Equal(t, tc.wantCode, e.Error.Code)
			}
			if tc.wantField != "" {
				require.Equal(t, tc.wantField, e.Error.Field, "message: %s", e.Error.Message)
			}
		})
	}
	// Nothing above created a job.
	page, err := b.store.ListJobs(b.ctx, jobs.ListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
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
	page, err := b.store.ListJobs(b.ctx, jobs.ListParams{Queue: "all-or-nothing"})
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
	claimed, err := b.store.ClaimJobs(b.ctx, jobs.ClaimParams{WorkerID: "w", Limit: 10, LeaseTTL: time.Minute})
	require.NoError(t, err)
	var fins []jobs.Finish
	for _, j := range claimed {
		fins = append(fins, jobs.Finish{Lease: jobs.LeaseOf(j), Outcome: jobs.OutcomeFailed, Error: "<script>alert(1)</script>"})
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
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
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
