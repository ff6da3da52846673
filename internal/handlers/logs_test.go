package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// logsBundle is a dashboard whose Logs page reads the store that two
// processes' loggers ship to, as two Flint processes on one database.
type logsBundle struct {
	*dashBundle
	api, worker *logs.Logger
	stop        func() // stores what both logged, then stops them shipping
}

var (
	apiProc    = logs.Process{ID: "api-host-101-aaa", Host: "api-host", Role: "api"}
	workerProc = logs.Process{ID: "worker-7", Host: "worker-host", Role: "worker"}
)

func logsSetup(t *testing.T) *logsBundle {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	_, err := store.EnsureUser(context.Background(), adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	app := handlers.New(handlers.Config{APIKey: apiKey, Dashboard: store, Logs: store, BaseContext: ctx,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	b := &logsBundle{dashBundle: &dashBundle{app: app, store: store, ctx: context.Background(), cookies: map[string]string{}}}
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)
	var stops []func()
	shipper := func(p logs.Process) *logs.Logger {
		lg, err := logs.New(logs.Config{Stdout: io.Discard, Level: "debug"})
		require.NoError(t, err)
		sctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			lg.Ship(sctx, store, logs.ShipConfig{Process: p, Interval: 10 * time.Millisecond})
		}()
		stops = append(stops, func() { stop(); <-done })
		return lg
	}
	b.api, b.worker = shipper(apiProc), shipper(workerProc)
	b.stop = func() {
		for _, s := range stops {
			s()
		}
		stops = nil
	}
	t.Cleanup(func() { b.stop() })
	return b
}

// apiLogs reads GET /api/v1/logs with the given query.
func (b *logsBundle) apiLogs(t *testing.T, query string) []logs.Entry {
	t.Helper()
	r := b.request(t, http.MethodGet, "/api/v1/logs?"+query, nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, r.status, r.body)
	var out struct {
		Entries    []logs.Entry `json:"entries"`
		NextBefore *string      `json:"next_before"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &out))
	return out.Entries
}

// Two processes log; the API returns the entries of both, each with its
// process, and narrows them to one process, one component, a time.
func TestLogsOfTwoProcesses(t *testing.T) {
	t.Parallel()
	b := logsSetup(t)
	b.api.Slog().Info("listening", "component", "http", "url", "http://localhost:8080")
	b.worker.Slog().Warn("job failed; will retry", "component", "worker", "attempt", 1)
	b.worker.Slog().Info("pool started", "component", "worker", "workers", 4)
	b.stop()

	all := b.apiLogs(t, "")
	require.Len(t, all, 3)
	require.Equal(t, "pool started", all[0].Msg, "newest first")
	seen := map[string]logs.Process{}
	for _, e := range all {
		seen[e.Msg] = logs.Process{ID: e.ProcessID, Host: e.Host, Role: e.Role}
		require.NotZero(t, e.ID)
	}
	require.Equal(t, map[string]logs.Process{"listening": apiProc, "job failed; will retry": workerProc, "pool started": workerProc}, seen)

	onWorker := b.apiLogs(t, "process="+workerProc.ID)
	require.Len(t, onWorker, 2)
	for _, e := range onWorker {
		require.Equal(t, workerProc.ID, e.ProcessID)
	}
	onAPI := b.apiLogs(t, "process="+apiProc.ID+"&component=http")
	require.Len(t, onAPI, 1)
	require.Equal(t, "http://localhost:8080", onAPI[0].Attrs["url"])
	require.Len(t, b.apiLogs(t, "process="+workerProc.ID+"&level=warn"), 1)
	require.Len(t, b.apiLogs(t, "last=15m"), 3)
	require.Empty(t, b.apiLogs(t, "until="+url.QueryEscape(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))))
	require.Len(t, b.apiLogs(t, "since="+url.QueryEscape(time.Now().Add(-time.Minute).UTC().Format("2006-01-02T15:04:05"))), 3, "a time without a zone is UTC")

	// The page offers both processes, and its filter narrows the table to
	// one; every row says which process wrote it.
	pg := b.request(t, http.MethodGet, "/logs", nil)
	require.Equal(t, http.StatusOK, pg.status)
	doc := parseHTML(t, pg.body)
	byTestID := func(n *html.Node, id string) []*html.Node {
		return findAll(n, func(n *html.Node) bool { return attr(n, "data-testid") == id })
	}
	var options []string
	for _, o := range findAll(byTestID(doc, "log-process")[0], func(n *html.Node) bool { return n.Data == "option" }) {
		options = append(options, attr(o, "value")+"|"+textOf(o))
	}
	require.Equal(t, []string{"|All processes", workerProc.ID + "|worker · worker-7 on worker-host", apiProc.ID + "|api · api-host-101-aaa"}, options,
		"the most recently heard from first; the host when the id does not say it")
	require.Len(t, byTestID(doc, "log-row"), 3)
	narrowed := b.hx(t, http.MethodGet, "/logs?process="+workerProc.ID, nil, "log-table")
	require.Equal(t, http.StatusOK, narrowed.status)
	doc = parseHTML(t, narrowed.body)
	require.Len(t, byTestID(doc, "log-table"), 1, "the table alone")
	require.Empty(t, byTestID(doc, "log-filters"))
	rows := byTestID(doc, "log-row")
	require.Len(t, rows, 2)
	for _, r := range rows {
		cell := byTestID(r, "log-process-cell")[0]
		link := findAll(cell, func(n *html.Node) bool { return n.Data == "a" })[0]
		require.Equal(t, workerProc.ID, textOf(link))
		require.Equal(t, "/logs?process="+workerProc.ID, attr(link, "href"))
		require.Equal(t, "worker", textOf(findAll(cell, func(n *html.Node) bool { return n.Data == "span" })[0]))
	}

	bad := b.request(t, http.MethodGet, "/api/v1/logs?last=forever", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Contains(t, bad.body, `"field":"last"`)
	bad = b.request(t, http.MethodGet, "/api/v1/logs?before=djEueHl6LjE", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Contains(t, bad.body, `"field":"before"`)
	bad = b.request(t, http.MethodGet, "/logs?job_id=42", nil)
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Contains(t, bad.body, "job_id must be a job id")
}

// A limit outside 1-500 is refused like every other bad filter, by the API
// and the Logs page, naming limit and its range; 0 is not "the default".
func TestLogsLimitOutOfRange(t *testing.T) {
	t.Parallel()
	b := logsSetup(t)
	b.api.Slog().Info("listening", "component", "http")
	b.stop()
	for _, limit := range []string{"0", "-1", "501", "x"} {
		r := b.request(t, http.MethodGet, "/api/v1/logs?limit="+limit, nil, "X-API-Key", apiKey)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "limit=%s: %s", limit, r.body)
		var e struct {
			Error struct{ Field, Message string }
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &e))
		require.Equal(t, "limit", e.Error.Field)
		require.Equal(t, "must be a whole number between 1 and 500", e.Error.Message)

		p := b.request(t, http.MethodGet, "/logs?limit="+limit, nil)
		require.Equal(t, http.StatusUnprocessableEntity, p.status, "limit=%s", limit)
		require.Contains(t, p.body, "limit must be a whole number between 1 and 500")
		require.Empty(t, findAll(parseHTML(t, p.body), func(n *html.Node) bool { return attr(n, "data-testid") == "log-row" }))
		p = b.hx(t, http.MethodGet, "/logs?limit="+limit, nil, "log-table")
		require.Equal(t, http.StatusUnprocessableEntity, p.status, "limit=%s", limit)
		require.Contains(t, p.body, "limit must be a whole number between 1 and 500")
	}
	for _, limit := range []string{"1", "500"} {
		require.Len(t, b.apiLogs(t, "limit="+limit), 1)
		require.Equal(t, http.StatusOK, b.request(t, http.MethodGet, "/logs?limit="+limit, nil).status)
	}
}

// TestLogSecretsNeverShown logs secrets in every place the scrubber covers
// and reads them back through the stored rows, the log API, the Logs page
// and its live tail: none may appear.
func TestLogSecretsNeverShown(t *testing.T) {
	t.Parallel()
	b := logsSetup(t)

	// The page marks where its live tail starts.
	first := b.request(t, http.MethodGet, "/logs?q=probe", nil)
	require.Equal(t, http.StatusOK, first.status)
	m := regexp.MustCompile(`data-mark="([0-9.]+)"`).FindStringSubmatch(first.body)
	require.NotNil(t, m, "the first page of logs updates live")
	require.Contains(t, first.body, `data-live-logs="/logs/tail?q=probe"`)

	secrets := []string{"s3cr3t-pass", "tok-abc123", "smtp-pw-777", "cookie-val-9", "payload-secret-42"}
	logger := b.worker.Slog()
	logger.Info("probe login", "password", secrets[0], "api_key", secrets[1])
	logger.Warn("probe smtp", "error", "dial smtp://flint:"+secrets[2]+"@mail.example:25 failed")
	logger.Info("probe header", "authorization", "Bearer "+secrets[1], "cookie", secrets[3])
	logger.Info("probe payload", "payload", []byte(`{"user":"x","password":"`+secrets[4]+`"}`))
	b.api.Slog().Info("probe from the api process", "session", secrets[3])
	b.stop()

	// The rows as stored.
	var stored string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT string_agg(message || ' ' || attrs::text, E'\n') FROM process_logs WHERE message LIKE 'probe%'`).Scan(&stored))
	require.Contains(t, stored, logs.Redacted)
	require.Contains(t, stored, "smtp://flint:"+logs.Redacted+"@mail.example:25", "the rest of the value is kept")

	// The live tail: the rows the page adds, fetched after its mark. The
	// tail shows a row once no transaction on the server is older than it
	// or, at the latest, 30 s after it was stored: a test elsewhere on the
	// server holding a transaction open (the claim plan test holds one
	// while it loads a backlog) keeps it back up to that bound.
	var tail page
	require.Eventually(t, func() bool {
		tail = b.request(t, http.MethodGet, "/logs/tail?q=probe&after="+m[1], nil, "HX-Request", "true")
		require.Equal(t, http.StatusOK, tail.status)
		return strings.Count(tail.body, `data-testid="log-row"`) == 5
	}, 40*time.Second, 20*time.Millisecond, tail.body)
	require.Less(t, strings.Index(tail.body, "probe from the api process"), strings.Index(tail.body, "probe login"), "newest first")
	mark := tail.header.Get("X-Log-Mark")
	require.Regexp(t, `^\d+\.\d+$`, mark)
	again := b.request(t, http.MethodGet, "/logs/tail?q=probe&after="+mark, nil, "HX-Request", "true")
	require.Equal(t, http.StatusOK, again.status)
	require.NotContains(t, again.body, "log-row", "nothing new since the last fetch")
	bad := b.request(t, http.MethodGet, "/logs/tail?after=soon", nil, "HX-Request", "true")
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Contains(t, bad.body, "after")

	// The API.
	api := b.request(t, http.MethodGet, "/api/v1/logs?q=probe", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, api.status)
	require.Contains(t, api.body, "probe login")
	require.Contains(t, api.body, logs.Redacted)
	// The page.
	pg := b.request(t, http.MethodGet, "/logs?q=probe", nil)
	require.Contains(t, pg.body, "probe smtp")
	for _, s := range secrets {
		require.NotContains(t, stored, s, "stored rows")
		require.NotContains(t, tail.body, s, "live tail")
		require.NotContains(t, api.body, s, "log API")
		require.NotContains(t, pg.body, s, "Logs page")
	}
}
