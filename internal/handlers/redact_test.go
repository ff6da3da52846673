package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestWebhookURLsOnlyForAdmins: an alert webhook's URL is often its
// credential. Admins see it whole; every other reader, person or key, sees
// its scheme and host only, in the rules, the rule page, the deliveries and
// their errors, a test's result and the audit trail (including entries
// written before, which held it whole). New audit entries keep only the
// redacted form and a fingerprint, for admins too.
func TestWebhookURLsOnlyForAdmins(t *testing.T) {
	t.Parallel()
	app, store, dsn, ctx, srvURL := alertsApp(t)
	const secret = "T0SECRET/B0SECRET/XXsecretXX"
	hook := srvURL + "/services/" + secret
	shown := srvURL + "/…"

	// The rule, made by an admin; a failed delivery whose error quotes the
	// URL, and an audit entry holding it whole, as older versions wrote.
	res := apiCall(t, app, apiKey, http.MethodPost, "/api/v1/alerts/rules", `{"kind":"no_worker","name":"pager","webhook_url":"`+hook+`"}`)
	require.Equal(t, http.StatusCreated, res.status, string(res.body))
	var rule struct{ ID int64 }
	require.NoError(t, json.Unmarshal(res.body, &rule))
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO alert_outbox (channel, recipients, subject, text_body, html_body, webhook_url, attempts, failed_at, last_error)
		VALUES ('webhook', '{}', 'pager fired', '{}', '', $1, 5, now(), $2)`, hook, `webhook: Post "`+hook+`": dial tcp: connection refused`)
	require.NoError(t, err)
	details, _ := json.Marshal(map[string]any{"before": map[string]any{"webhook_url": hook}, "after": map[string]any{"webhook_url": hook}})
	require.NoError(t, store.RecordAudit(ctx, domain.AuditEntry{Actor: "ops@example.com", Source: "dashboard", Action: "alert_rule_update", Details: details}))

	// The audit trail's new entry holds no secret, for anybody.
	requireRuleCreatedRedacted(t, store, ctx, secret, hook, shown)

	ruleID := jsonNum(rule.ID)
	apiReads := []string{"/api/v1/alerts/rules", "/api/v1/alerts/rules/" + ruleID, "/api/v1/alerts/deliveries", "/api/v1/audit"}
	pages := []string{"/alerts", "/alerts/rules/" + ruleID, "/audit"}

	keys, people := keysAndPeople(t, app, store, ctx)

	for sc, key := range keys {
		for _, path := range apiReads {
			res := apiCall(t, app, key, http.MethodGet, path, "")
			require.Equal(t, http.StatusOK, res.status, "%s %s", sc, path)
			if sc == auth.ScopeAdmin {
				require.Contains(t, string(res.body), hook, "%s %s: admins see the URL", sc, path)
				continue
			}
			require.NotContains(t, string(res.body), secret, "%s %s", sc, path)
			require.Contains(t, string(res.body), shown, "%s %s: where it points is shown", sc, path)
		}
	}
	res = apiCall(t, app, keys[auth.ScopeOperate], http.MethodPost, "/api/v1/alerts/rules/"+ruleID+"/test", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.NotContains(t, string(res.body), secret)
	require.Contains(t, string(res.body), `"target":"`+shown+`"`)
	res = apiCall(t, app, keys[auth.ScopeAdmin], http.MethodPost, "/api/v1/alerts/rules/"+ruleID+"/test", "")
	require.Contains(t, string(res.body), `"target":"`+hook+`"`)

	for role, b := range people {
		for _, path := range pages {
			p := b.request(t, http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, p.status, "%s %s", role, path)
			if role == auth.RoleAdmin {
				continue
			}
			require.NotContains(t, p.body, secret, "%s %s", role, path)
			require.NotContains(t, p.body, url.PathEscape(secret), "%s %s", role, path)
		}
		if role == auth.RoleViewer {
			continue
		}
		p := b.hx(t, http.MethodPost, "/alerts/rules/"+ruleID+"/test", url.Values{}, "rule-test")
		require.Equal(t, http.StatusOK, p.status, "%s test", role)
		if role != auth.RoleAdmin {
			require.NotContains(t, p.body, secret, "%s test", role)
		}
	}
	require.Contains(t, people[auth.RoleAdmin].request(t, http.MethodGet, "/alerts/rules/"+ruleID, nil).body, hook, "the admin's form holds the URL to edit")
	require.True(t, strings.Contains(people[auth.RoleAdmin].request(t, http.MethodGet, "/audit", nil).body, secret), "admins read the old entry as it was")
}

func jsonNum(n int64) string { return jsonID(float64(n)) }

// keysAndPeople makes an API key of each scope and signs in a person of
// each role.
func keysAndPeople(t *testing.T, app *fiber.App, store *db.Store, ctx context.Context) (map[auth.Scope]string, map[auth.Role]*dashBundle) {
	t.Helper()
	keys := map[auth.Scope]string{}
	for _, sc := range []auth.Scope{auth.ScopeRead, auth.ScopeOperate, auth.ScopeAdmin} {
		_, s, err := store.CreateAPIKey(ctx, auth.KeySpec{Name: "svc-" + string(sc), Scopes: []auth.Scope{sc}}, "test")
		require.NoError(t, err)
		keys[sc] = s
	}
	people := map[auth.Role]*dashBundle{}
	for _, role := range auth.Roles {
		email := string(role) + "@example.com"
		_, err := store.AddUser(ctx, email, rolePassword, role)
		require.NoError(t, err)
		people[role] = &dashBundle{app: app, store: store, ctx: ctx, cookies: map[string]string{}}
		people[role].login(t, email, rolePassword, http.StatusSeeOther)
	}
	return keys, people
}

// requireRuleCreatedRedacted requires that the audit entry of a rule's
// creation holds the webhook URL (hook, with secret in its path) only as
// shown (scheme and host) and its fingerprint.
func requireRuleCreatedRedacted(t *testing.T, store *db.Store, ctx context.Context, secret, hook, shown string) {
	t.Helper()
	entries, err := store.ListAudit(ctx, domain.AuditQuery{Limit: 10})
	require.NoError(t, err)
	var created domain.AuditEntry
	for _, e := range entries {
		if e.Action == "alert_rule_create" {
			created = e
		}
	}
	require.NotContains(t, string(created.Details), secret)
	var kept map[string]any
	require.NoError(t, json.Unmarshal(created.Details, &kept))
	require.Equal(t, shown, kept["webhook_url"])
	require.Equal(t, domain.URLFingerprint(hook), kept["webhook_url_fingerprint"])
}

// alertsApp serves the API and the dashboard over a new database, with
// alert tests sent to a receiver that fails (its URL is srvURL).
func alertsApp(t *testing.T) (app *fiber.App, store *db.Store, dsn string, ctx context.Context, srvURL string) {
	t.Helper()
	store, dsn = dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	rc := &receiver{status: http.StatusInternalServerError}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	sender, err := workers.NewAlertSender(nil, []string{"127.0.0.1"}, 5*time.Second)
	require.NoError(t, err)
	n := scheduler.NewNotifier(scheduler.NotifierConfig{}, sender, nil)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	app = handlers.New(handlers.Config{APIKey: apiKey, Dashboard: store, Alerts: store, Audit: store, Access: store, AlertTest: n.SendTest,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return app, store, dsn, ctx, srv.URL
}
