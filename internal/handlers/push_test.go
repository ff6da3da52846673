package handlers_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// TestPushQueueAPI: PATCH sets a queue's push target (checked: scheme,
// timeout, and the SSRF guard) and answers its secret once; any type may
// then be enqueued into it; only admins see the URL whole; rotation and
// revocation answer 409 when out of turn.
func TestPushQueueAPI(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	cat := domain.NewCatalog(reg, nil, store.ServedTypes)
	cat.PushQueues(store.PushedQueue)
	app := handlers.New(handlers.Config{APIKey: apiKey, Access: store, Audit: store, BaseContext: ctx, Types: cat, HTTPAllow: []string{"127.0.0.1:9"}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := &workRig{app: app, store: store, ctx: ctx}
	_, reader, err := store.CreateAPIKey(ctx, auth.KeySpec{Name: "reader", Scopes: []auth.Scope{auth.ScopeRead}}, "test")
	require.NoError(t, err)

	for body, field := range map[string]string{
		`{"push": {"url": "ftp://127.0.0.1:9/x"}}`:                           "push.url",
		`{"push": {"url": "http://127.0.0.1:9/x", "timeout_seconds": 0}}`:    "push.timeout_seconds",
		`{"push": {"url": "http://127.0.0.1:9/x", "timeout_seconds": 1801}}`: "push.timeout_seconds",
		`{"push": {"timeout_seconds": 5}}`:                                   "push.url",
		`{"push": {"url": "http://10.1.2.3/hook"}}`:                          "push.url",
		`{"push": {"url": "http://169.254.169.254/latest"}}`:                 "push.url",
		`{"push": {"url": "http://127.0.0.1:9/x", "retries": 2}}`:            "push.retries",
		`{"push": "http://127.0.0.1:9/x"}`:                                   "push",
	} {
		var e errBody
		require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPatch, "/api/v1/queues/hooks", body, &e), body)
		require.Equal(t, field, e.Error.Field, body)
	}
	var e errBody
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", `{"type": "py.resize", "queue": "hooks"}`, &e))

	var q struct {
		Push struct {
			URL            string `json:"url"`
			TimeoutSeconds int    `json:"timeout_seconds"`
			Secret         string `json:"secret"`
			Secrets        int    `json:"secrets"`
		} `json:"push"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPatch, "/api/v1/queues/hooks", `{"push": {"url": "http://127.0.0.1:9/jobs?token=t0ps3cret"}}`, &q))
	require.True(t, strings.HasPrefix(q.Push.Secret, "whsec_"), "the secret, once")
	require.Equal(t, 60, q.Push.TimeoutSeconds)
	require.Equal(t, 1, q.Push.Secrets)
	q.Push.Secret = ""
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPatch, "/api/v1/queues/hooks", `{"push": {"url": "http://127.0.0.1:9/jobs?token=t0ps3cret", "timeout_seconds": 10}}`, &q))
	require.Empty(t, q.Push.Secret, "a changed push keeps its secret, unshown")
	require.Equal(t, 10, q.Push.TimeoutSeconds)

	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, "/api/v1/queues/hooks", nil, &q))
	require.Contains(t, q.Push.URL, "t0ps3cret", "admins see the URL whole")
	require.Equal(t, http.StatusOK, r.call(t, reader, http.MethodGet, "/api/v1/queues/hooks", nil, &q))
	require.Equal(t, "http://127.0.0.1:9/…", q.Push.URL, "readers see scheme and host")
	var audit map[string]any
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, "/api/v1/audit", nil, &audit))
	raw := func() string { b, _ := jsonMarshal(audit); return b }()
	require.NotContains(t, raw, "t0ps3cret", "the audit trail keeps where it points, not the token")

	var job map[string]any
	require.Equal(t, http.StatusCreated, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", `{"type": "py.resize", "queue": "hooks"}`, &job),
		"a push queue takes any type: its endpoint serves the whole queue")

	require.Equal(t, http.StatusConflict, r.call(t, apiKey, http.MethodPost, "/api/v1/queues/hooks/push/revoke", nil, &e))
	var rot struct {
		Secret  string `json:"secret"`
		Secrets int    `json:"secrets"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/queues/hooks/push/rotate", nil, &rot))
	require.True(t, strings.HasPrefix(rot.Secret, "whsec_"))
	require.Equal(t, 2, rot.Secrets)
	require.Equal(t, http.StatusConflict, r.call(t, apiKey, http.MethodPost, "/api/v1/queues/hooks/push/rotate", nil, &e))
	require.Contains(t, e.Error.Message, "revoke it first")
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/queues/hooks/push/revoke", nil, nil))
	require.Equal(t, http.StatusForbidden, r.call(t, reader, http.MethodPost, "/api/v1/queues/hooks/push/rotate", nil, &e))
	require.Equal(t, http.StatusNotFound, r.call(t, apiKey, http.MethodPost, "/api/v1/queues/nowhere/push/rotate", nil, &e))

	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPatch, "/api/v1/queues/hooks", `{"push": null}`, &q))
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", `{"type": "py.resize", "queue": "hooks"}`, &e),
		"without its push the queue takes only served types again")
}
