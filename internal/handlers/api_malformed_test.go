package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// malformedRequest is a bad request and the refusal it must get.
type malformedRequest struct {
	name        string
	method      string
	path        string
	contentType string
	body        string
	noKey       bool
	wantStatus  int
	wantCode    string
	wantField   string
}

// malformedRequests are the bad requests TestMalformedRequests sends.
func malformedRequests() []malformedRequest {
	big := `{"type":"noop","payload":{"x":"` + strings.Repeat("a", jobs.MaxPayloadBytes) + `"}}`
	many := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"type":"noop"},`, handlers.MaxBatch+1), ",") + `]}`
	deep := `{"type":"noop","payload":{"a":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}}`
	return append([]malformedRequest{
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
		{name: "list bad status", method: "GET", path: "/api/v1/jobs?status=started", wantStatus: 422, wantField: "status"},
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
	}, hostileJSON(deep)...)
}

// hostileJSON are requests whose JSON PostgreSQL cannot store or nobody
// can render: nesting 9,990 levels deep (deep), invalid UTF-8, lone
// surrogates and numbers that grow a thousandfold when written out, on
// every route that takes a payload.
func hostileJSON(deep string) []malformedRequest {
	return []malformedRequest{
		{name: "payload nested 9990 deep", path: "/api/v1/jobs", body: deep, wantStatus: 422, wantField: "payload"},
		{name: "payload nested 65 deep", path: "/api/v1/jobs", body: `{"type":"noop","payload":` + strings.Repeat(`{"a":`, 65) + `1` + strings.Repeat("}", 65) + `}`, wantStatus: 422, wantField: "payload"},
		{name: "payload invalid utf-8", path: "/api/v1/jobs", body: "{\"type\":\"noop\",\"payload\":{\"x\":\"\xff\"}}", wantStatus: 422, wantField: "payload"},
		{name: "payload key invalid utf-8", path: "/api/v1/jobs", body: "{\"type\":\"noop\",\"payload\":{\"\xfe\xff\":1}}", wantStatus: 422, wantField: "payload"},
		{name: "payload lone surrogate", path: "/api/v1/jobs", body: `{"type":"noop","payload":{"x":"\ud800"}}`, wantStatus: 422, wantField: "payload"},
		{name: "payload lone low surrogate", path: "/api/v1/jobs", body: `{"type":"noop","payload":{"x":"\udfff"}}`, wantStatus: 422, wantField: "payload"},
		{name: "payload number that grows", path: "/api/v1/jobs", body: `{"type":"noop","payload":{"x":1e131071}}`, wantStatus: 422, wantField: "payload"},
		{name: "payload number numeric refuses", path: "/api/v1/jobs", body: `{"type":"noop","payload":{"x":1e-20000}}`, wantStatus: 422, wantField: "payload"},
		{name: "batch entry invalid utf-8", path: "/api/v1/jobs/batch", body: "{\"jobs\":[{\"type\":\"noop\"},{\"type\":\"noop\",\"payload\":{\"x\":\"\xff\"}}]}", wantStatus: 422, wantField: "jobs[1].payload"},
		{name: "batch entry lone surrogate", path: "/api/v1/jobs/batch", body: `{"jobs":[{"type":"noop","payload":{"x":"\ud800"}}]}`, wantStatus: 422, wantField: "jobs[0].payload"},
		{name: "batch entry too deep", path: "/api/v1/jobs/batch", body: `{"jobs":[` + strings.TrimPrefix(deep, "") + `]}`, wantStatus: 422, wantField: "jobs[0].payload"},
		{name: "workflow invalid utf-8", path: "/api/v1/workflows", body: "{\"jobs\":[{\"key\":\"a\",\"type\":\"noop\",\"payload\":{\"x\":\"\xff\"}}]}", wantStatus: 422, wantField: "jobs[0].payload"},
		{name: "workflow lone surrogate", path: "/api/v1/workflows", body: `{"jobs":[{"key":"a","type":"noop","payload":{"x":"\ud800"}}]}`, wantStatus: 422, wantField: "jobs[0].payload"},
		{name: "recurring invalid utf-8", path: "/api/v1/jobs", body: "{\"type\":\"noop\",\"interval_seconds\":60,\"payload\":{\"x\":\"\xff\"}}", wantStatus: 422, wantField: "payload"},
		{name: "recurring lone surrogate", path: "/api/v1/jobs", body: `{"type":"noop","cron":"@daily","payload":{"x":"\ud800"}}`, wantStatus: 422, wantField: "payload"},
		{name: "idempotency key NUL", path: "/api/v1/jobs", body: `{"type":"noop","idempotency_key":"a\u0000b"}`, wantStatus: 422, wantField: "idempotency_key"},
	}
}

// TestMalformedRequests: every bad request gets the right 4xx and a JSON
// error that names what to fix, never a 5xx.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range malformedRequests() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireRefused(t, b, tc)
		})
	}
	// Nothing above created a job.
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
}

// requireRefused sends tc's request and requires its refusal: the status,
// and a JSON error with a message, the code and the field.
func requireRefused(t *testing.T, b *testBundle, tc malformedRequest) {
	t.Helper()
	r := sendMalformed(t, b, tc)
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
}

// sendMalformed sends tc's request as it is written.
func sendMalformed(t *testing.T, b *testBundle, tc malformedRequest) response {
	t.Helper()
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
	return r
}
