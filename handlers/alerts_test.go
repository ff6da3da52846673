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

	"github.com/stretchr/testify/require"

	"flint/db/dbtest"
	"flint/handlers"
	"flint/jobs"
	"flint/scheduler"
	"flint/workers"
)

// receiver is a webhook endpoint on this machine that keeps what it got.
type receiver struct {
	mu     sync.Mutex
	bodies [][]byte
	sigs   []string
	status int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies = append(rc.bodies, body)
	rc.sigs = append(rc.sigs, r.Header.Get(workers.WebhookSignatureHeader))
	w.WriteHeader(rc.status)
}

func setupAlerts(t *testing.T) (*testBundle, *receiver, string) {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	reg := jobs.NewRegistry()
	jobs.RegisterBuiltins(reg, jobs.BuiltinDeps{})
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

func TestAlertRulesAPI(t *testing.T) {
	t.Parallel()
	b, rc, hook := setupAlerts(t)

	// Bad input: a clear 4xx naming the field.
	for _, c := range []struct{ body, field string }{
		{`{"name":"x"}`, "kind"},
		{`{"kind":"cpu","name":"x"}`, "kind"},
		{`{"kind":"failure_rate"}`, "name"},
		{`{"kind":"failure_rate","name":"x","threshold":1.5}`, "threshold"},
		{`{"kind":"failure_rate","name":"x","window_seconds":5}`, "window_seconds"},
		{`{"kind":"queue_latency","name":"x","threshold":0}`, "threshold"},
		{`{"kind":"queue_latency","name":"x","type":"mail"}`, "type"},
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

	// Create with a webhook and no secret: one is made and shown once.
	r = b.post(t, "/api/v1/alerts/rules", `{"kind":"failure_rate","name":"reports failing","type":"report","threshold":0.3,"webhook_url":"`+hook+`/hook"}`)
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
	var res struct{ Deliveries []jobs.AlertDelivery }
	require.NoError(t, json.Unmarshal(r.body, &res))
	require.Len(t, res.Deliveries, 1)
	require.True(t, res.Deliveries[0].OK, "%+v", res.Deliveries)
	rc.mu.Lock()
	require.Len(t, rc.bodies, 1)
	body, sig := rc.bodies[0], rc.sigs[0]
	rc.mu.Unlock()
	ts, err := strconv.ParseInt(strings.TrimPrefix(strings.Split(sig, ",")[0], "t="), 10, 64)
	require.NoError(t, err, sig)
	require.WithinDuration(t, time.Now(), time.Unix(ts, 0), time.Minute)
	require.Equal(t, sig, workers.SignWebhook(secret, time.Unix(ts, 0), body), "the signature is HMAC-SHA256 of t.body with the secret")
	require.NotEqual(t, sig, workers.SignWebhook("another secret", time.Unix(ts, 0), body))
	var payload map[string]any
	require.NoError(t, json.Unmarshal(body, &payload))
	require.Contains(t, payload["text"], "Flint test alert: reports failing")
	require.Equal(t, "test", payload["flint"].(map[string]any)["event"])

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
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/"+id, "application/json", `{"webhook_secret":"a-new-secret-0123456789"}`)
	require.Equal(t, "a-new-secret-0123456789", r.json(t)["webhook_secret"])
	r = b.do(t, http.MethodPatch, "/api/v1/alerts/rules/999999", "application/json", `{"enabled":true}`)
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/alerts/rules/abc", "", "")
	require.Equal(t, http.StatusNotFound, r.status)

	// A rule with nowhere to send cannot be tested.
	r = b.post(t, "/api/v1/alerts/rules", `{"kind":"no_worker","name":"orphans"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = b.post(t, "/api/v1/alerts/rules/"+jsonID(r.json(t)["id"])+"/test", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)

	// History and deliveries list; bad filters are refused.
	r = b.do(t, http.MethodGet, "/api/v1/alerts?status=firing", "", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, []any{}, r.json(t)["alerts"])
	r = b.do(t, http.MethodGet, "/api/v1/alerts?status=open", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/alerts/deliveries?limit=0", "", "")
	require.Equal(t, http.StatusUnprocessableEntity, r.status)

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
