package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// receiver is a webhook endpoint on this machine that keeps what it got.
type receiver struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	status  int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, body)
	rc.headers = append(rc.headers, r.Header.Clone())
	w.WriteHeader(rc.status)
}

func setupAlerts(t *testing.T) (*testBundle, *receiver, string) {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := &receiver{status: http.StatusOK}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	sender, err := workers.NewAlertSender(nil, []string{"127.0.0.1"}, 5*time.Second)
	require.NoError(t, err)
	n := scheduler.NewNotifier(scheduler.NotifierConfig{}, sender, nil)
	app := handlers.New(handlers.Config{APIKey: apiKey, Alerts: store, Audit: store, AlertTest: n.SendTest}, store, reg, logger)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &testBundle{app: app, store: store, ctx: ctx}, rc, srv.URL
}

// TestAlertRulesAPIRefusesBadInput: a bad rule or filter gets a clear
// 4xx naming the field.
func TestAlertRulesAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	b, _, _ := setupAlerts(t)
	for _, c := range []struct{ body, field string }{
		{`{"name":"x"}`, "kind"},
		{`{"kind":"cpu","name":"x"}`, "kind"},
		{`{"kind":"failure_rate"}`, "name"},
		{`{"kind":"failure_rate","name":"x","threshold":1.5}`, "threshold"},
		{`{"kind":"failure_rate","name":"x","window_seconds":5}`, "window_seconds"},
		{`{"kind":"queue_latency","name":"x","threshold":0}`, "threshold"},
		{`{"kind":"queue_latency","name":"x","type":"mail"}`, "type"},
		{`{"kind":"job_waiting","name":"x","threshold":0.5}`, "threshold"},
		{`{"kind":"job_waiting","name":"x","threshold":86400,"type":"mail"}`, "type"},
		{`{"kind":"cron_overdue","name":"x","series":"nope"}`, "series"},
		{`{"kind":"cron_overdue","name":"x","series":"0190a0b0-0000-7000-8000-000000000000"}`, "series"},
		{`{"kind":"no_worker","name":"x","grace_seconds":-1}`, "grace_seconds"},
		{`{"kind":"no_worker","name":"x","cooldown_seconds":1}`, "cooldown_seconds"},
		{`{"kind":"no_worker","name":"x","emails":["Ops <ops@example.test>"]}`, "emails[0]"},
		{`{"kind":"no_worker","name":"x","webhook_url":"ftp://example.test/x"}`, "webhook_url"},
		{`{"kind":"no_worker","name":"x","webhook_url":"https://u:p@example.test/x"}`, "webhook_url"},
		{`{"kind":"no_worker","name":"x","webhook_url":"https://example.test/x","webhook_secret":"short"}`, "webhook_secret"},
	} {
		r := b.post(t, "/api/v1/alerts/rules", c.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", c.body, r.body)
		e := r.json(t)["error"].(map[string]any)
		require.Equal(t, c.field, e["field"], "%s: %s", c.body, r.body)
		require.NotEmpty(t, e["message"])
	}
	r := b.post(t, "/api/v1/alerts/rules", `{"kind":"no_worker","name":"x","colour":"red"}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	require.Equal(t, "colour", r.json(t)["error"].(map[string]any)["field"])

	// History and deliveries list: bad filters are refused.
	r = b.do(t, http.MethodGet, "/api/v1/alerts?status=firing", "", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, []any{}, r.json(t)["alerts"])
	r = b.do(t, http.MethodGet, "/api/v1/alerts?status=open", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/alerts/deliveries?limit=0", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	for _, bad := range []string{"abc", "0", "-3", "99999999999999999999"} {
		r = b.do(t, http.MethodGet, "/api/v1/alerts/deliveries?alert_id="+bad, "", "")
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", bad, r.body)
		require.Equal(t, "alert_id", r.json(t)["error"].(map[string]any)["field"])
	}
}

// TestAlertRulesAPI: a rule's life through the API: created with a secret
// shown once, tested against its receiver, changed, deleted, and all of it
// on the audit trail.
func TestAlertRulesAPI(t *testing.T) {
	t.Parallel()
	b, rc, hook := setupAlerts(t)

	// Create with a webhook and no secret: one is made and shown once.
	r := b.post(t, "/api/v1/alerts/rules", `{"kind":"failure_rate","name":"reports failing","type":"report","threshold":0.3,"webhook_url":"`+hook+`/hook"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	created := r.json(t)
	secret, _ := created["webhook_secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"), "%s", r.body)
	require.Equal(t, true, created["webhook_signed"])
	require.Equal(t, "more than 30% of report runs fail within 5 minutes (at least 10 runs)", created["condition"])
	id := jsonID(created["id"])

	r = b.do(t, http.MethodGet, "/api/v1/alerts/rules/"+id, "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, string(r.body), secret, "reads never show the secret")
	r = b.do(t, http.MethodGet, "/api/v1/alerts/rules", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.NotContains(t, string(r.body), secret)
	require.Len(t, r.json(t)["rules"], 1)

	// The test button reaches the receiver, signed with that secret.
	r = b.post(t, "/api/v1/alerts/rules/"+id+"/test", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var res struct{ Deliveries []domain.AlertDelivery }
	require.NoError(t, json.Unmarshal(r.body, &res))
	require.Len(t, res.Deliveries, 1)
	require.True(t, res.Deliveries[0].OK, "%+v", res.Deliveries)
	requireSignedTest(t, rc, secret)

	// A receiver that fails is reported as failed.
	rc.mu.Lock()
	rc.status = http.StatusInternalServerError
	rc.mu.Unlock()
	r = b.post(t, "/api/v1/alerts/rules/"+id+"/test", "")
	require.NoError(t, json.Unmarshal(r.body, &res))
	require.False(t, res.Deliveries[0].OK)
	require.Contains(t, res.Deliveries[0].Error, "500")

	// PATCH: partial, validated, the secret only shown when it changed.
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+id, "application/json", `{"threshold":2}`)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+id, "application/json", `{"threshold":0.5,"enabled":false}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	patched := r.json(t)
	require.Equal(t, 0.5, patched["threshold"])
	require.Equal(t, false, patched["enabled"])
	require.Nil(t, patched["webhook_secret"])
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+id, "application/json", `{"webhook_secret":"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}`)
	require.Equal(t, "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", r.json(t)["webhook_secret"])
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/999999", "application/json", `{"enabled":true}`)
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/alerts/rules/abc", "", "")
	require.Equal(t, http.StatusNotFound, r.status)

	// A rule with nowhere to send cannot be tested.
	r = b.post(t, "/api/v1/alerts/rules", `{"kind":"no_worker","name":"orphans"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.post(t, "/api/v1/alerts/rules/"+jsonID(r.json(t)["id"])+"/test", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)

	// Every change is on the audit trail, without the secret.
	r = b.do(t, http.MethodDelete, "/api/v1/alerts/rules/"+id, "", "")
	require.Equal(t, http.StatusNoContent, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/audit", "", "")
	require.Equal(t, http.StatusOK, r.status)
	trail := string(r.body)
	for _, action := range []string{"alert_rule_create", "alert_rule_update", "alert_rule_delete"} {
		require.Contains(t, trail, action)
	}
	require.NotContains(t, trail, secret)
	require.NotContains(t, trail, "a-new-secret-0123456789")
}

func jsonID(v any) string { return strconv.FormatFloat(v.(float64), 'f', -1, 64) }

// Every number given for a rule is checked against its range whatever the
// rule's kind — a value the kind does not use is still stored, and used to
// reach the table's CHECK (or overflow its column) as a 500 — and a PATCH
// cannot change a rule's kind. Each refusal is a 422 naming the field and
// the range.
func TestAlertRuleFieldsValidatedWhateverTheKind(t *testing.T) {
	t.Parallel()
	b, _, _ := setupAlerts(t)
	huge := "99999999999999"
	for _, c := range []struct{ body, field, says string }{
		{`{"kind":"queue_latency","name":"x","min_runs":-5}`, "min_runs", "between 1 and 1000000"},
		{`{"kind":"queue_latency","name":"x","window_seconds":0}`, "window_seconds", "between 60 and 86400"},
		{`{"kind":"queue_latency","name":"x","window_seconds":` + huge + `}`, "window_seconds", "between 60 and 86400"},
		{`{"kind":"queue_latency","name":"x","grace_seconds":-1}`, "grace_seconds", "between 0 and 604800"},
		{`{"kind":"failure_rate","name":"x","grace_seconds":-1}`, "grace_seconds", "between 0 and 604800"},
		{`{"kind":"failure_rate","name":"x","grace_seconds":` + huge + `}`, "grace_seconds", "between 0 and 604800"},
		{`{"kind":"failure_rate","name":"x","window_seconds":` + huge + `}`, "window_seconds", "between 60 and 86400"},
		{`{"kind":"failure_rate","name":"x","min_runs":` + huge + `}`, "min_runs", "between 1 and 1000000"},
		{`{"kind":"cron_overdue","name":"x","min_runs":0}`, "min_runs", "between 1 and 1000000"},
		{`{"kind":"cron_overdue","name":"x","window_seconds":-60}`, "window_seconds", "between 60 and 86400"},
		{`{"kind":"cron_overdue","name":"x","threshold":5}`, "threshold", "not used by cron_overdue rules"},
		{`{"kind":"no_worker","name":"x","min_runs":-1}`, "min_runs", "between 1 and 1000000"},
		{`{"kind":"no_worker","name":"x","cooldown_seconds":` + huge + `}`, "cooldown_seconds", "between 60 and 604800"},
		{`{"kind":"no_worker","name":"x","window_seconds":1e30}`, "window_seconds", "integer"},
	} {
		requireFieldError(t, b.post(t, "/api/v1/alerts/rules", c.body), c.field, c.says, c.body)
	}

	// The same through PATCH, on a rule of each kind; nothing changes.
	rules := map[string]string{}
	for _, kind := range []string{"failure_rate", "queue_latency", "cron_overdue", "no_worker"} {
		r := b.post(t, "/api/v1/alerts/rules", `{"kind":"`+kind+`","name":"`+kind+` rule"}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		rules[kind] = jsonID(r.json(t)["id"])
	}
	before := b.do(t, http.MethodGet, "/api/v1/alerts/rules", "", "")
	require.Equal(t, http.StatusOK, before.status)
	for _, c := range []struct{ kind, body, field, says string }{
		{"queue_latency", `{"min_runs":0}`, "min_runs", "between 1 and 1000000"},
		{"queue_latency", `{"min_runs":-5}`, "min_runs", "between 1 and 1000000"},
		{"queue_latency", `{"window_seconds":0}`, "window_seconds", "between 60 and 86400"},
		{"queue_latency", `{"window_seconds":` + huge + `}`, "window_seconds", "between 60 and 86400"},
		{"failure_rate", `{"min_runs":0}`, "min_runs", "between 1 and 1000000"},
		{"failure_rate", `{"grace_seconds":-1}`, "grace_seconds", "between 0 and 604800"},
		{"failure_rate", `{"window_seconds":` + huge + `}`, "window_seconds", "between 60 and 86400"},
		{"cron_overdue", `{"min_runs":0}`, "min_runs", "between 1 and 1000000"},
		{"cron_overdue", `{"threshold":0.5}`, "threshold", "not used by cron_overdue rules"},
		{"no_worker", `{"window_seconds":0,"name":"renamed"}`, "window_seconds", "between 60 and 86400"},
		{"no_worker", `{"grace_seconds":` + huge + `}`, "grace_seconds", "between 0 and 604800"},
		{"queue_latency", `{"kind":"failure_rate"}`, "kind", "cannot be changed; create a new rule"},
		{"failure_rate", `{"kind":"no_worker","threshold":0.5}`, "kind", "cannot be changed; create a new rule"},
		{"no_worker", `{"kind":"cpu"}`, "kind", "cannot be changed; create a new rule"},
	} {
		r := b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+rules[c.kind], "application/json", c.body)
		requireFieldError(t, r, c.field, c.says, c.kind+" "+c.body)
	}
	after := b.do(t, http.MethodGet, "/api/v1/alerts/rules", "", "")
	require.JSONEq(t, string(before.body), string(after.body), "refused changes change nothing")

	// In range, a field another kind uses is accepted (and kept), and a
	// PATCH may repeat the kind it has: a rule read back can be sent back.
	r := b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+rules["queue_latency"], "application/json",
		`{"kind":"queue_latency","min_runs":20,"window_seconds":600,"grace_seconds":0}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	got := r.json(t)
	require.EqualValues(t, 20, got["min_runs"])
	require.Equal(t, "queue_latency", got["kind"])
	r = b.do(t, http.MethodGet, "/api/v1/alerts/rules/"+rules["cron_overdue"], "", "")
	require.Equal(t, http.StatusOK, r.status)
	var whole map[string]any
	require.NoError(t, json.Unmarshal(r.body, &whole))
	for _, k := range []string{"id", "condition", "webhook_signed", "reaches", "warning", "created_at", "updated_at"} {
		delete(whole, k)
	}
	back, err := json.Marshal(whole)
	require.NoError(t, err)
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+rules["cron_overdue"], "application/json", string(back))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

// requireSignedTest requires that the receiver got one test alert, signed
// with secret by the Standard Webhooks scheme.
func requireSignedTest(t *testing.T, rc *receiver, secret string) {
	t.Helper()
	rc.mu.Lock()
	require.Len(t, rc.bodies, 1)
	body, hdr := rc.bodies[0], rc.headers[0]
	rc.mu.Unlock()
	// Verified by the Standard Webhooks reference library, not Flint's code.
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(body, hdr), "signed by the Standard Webhooks scheme with the rule's secret")
	other, err := standardwebhooks.NewWebhook(domain.NewWebhookSecret())
	require.NoError(t, err)
	require.Error(t, other.Verify(body, hdr), "another secret does not verify")
	var payload map[string]any
	require.NoError(t, json.Unmarshal(body, &payload))
	require.Contains(t, payload["text"], "Flint test alert: reports failing")
	require.Equal(t, "test", payload["flint"].(map[string]any)["event"])
}

// requireFieldError requires a 422 whose error names field and says says;
// what is the request, for the failure message.
func requireFieldError(t *testing.T, r response, field, says, what string) {
	t.Helper()
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", what, r.body)
	e := r.json(t)["error"].(map[string]any)
	require.Equal(t, field, e["field"], "%s: %s", what, r.body)
	require.Contains(t, e["message"], says, what)
}
