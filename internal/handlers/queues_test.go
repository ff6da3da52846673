package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestQueuesAPI: queues are listed with their counts and settings; pause,
// resume and limits change them, and are audited.
func TestQueuesAPI(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	api := func(method, path, _ string) page { return b.apiCall(t, method, path, "", "") }
	send := func(method, path, body string) page { return b.apiCall(t, method, path, body, "application/json") }
	b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"})
	b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail", ConcurrencyKey: "acme"})

	p := api(http.MethodGet, "/api/v1/queues", "")
	require.Equal(t, http.StatusOK, p.status, p.body)
	var list struct {
		Queues []domain.QueueInfo `json:"queues"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.body), &list))
	require.Len(t, list.Queues, 1)
	require.Equal(t, "mail", list.Queues[0].Name)
	require.Equal(t, int64(2), list.Queues[0].Counts[jobs.StateQueued])
	require.NotNil(t, list.Queues[0].OldestQueuedAt)
	require.False(t, list.Queues[0].Paused)

	p = send(http.MethodPost, "/api/v1/queues/mail/pause", "")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `"paused":true`)
	p = send(http.MethodPatch, "/api/v1/queues/mail", `{"concurrency": 3, "rate_limit": {"limit": 20, "period_seconds": 1}, "per_key_concurrency": 1}`)
	require.Equal(t, http.StatusOK, p.status, p.body)
	var q domain.QueueInfo
	require.NoError(t, json.Unmarshal([]byte(p.body), &q))
	require.True(t, q.Paused, "a limit change leaves the pause alone")
	require.Equal(t, 3, *q.Concurrency)
	require.Equal(t, domain.RateLimit{Limit: 20, PeriodSeconds: 1}, *q.RateLimit)
	require.Equal(t, 1, *q.PerKeyConcurrency)

	p = send(http.MethodPatch, "/api/v1/queues/mail", `{"rate_limit": null}`)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.NoError(t, json.Unmarshal([]byte(p.body), &q))
	require.Nil(t, q.RateLimit, "null removes the limit")
	require.Equal(t, 3, *q.Concurrency, "absent fields stay")
	p = send(http.MethodPost, "/api/v1/queues/mail/resume", "")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `"paused":false`)

	// A queue nobody has used: 404 to read, but it can be paused ahead.
	require.Equal(t, http.StatusNotFound, api(http.MethodGet, "/api/v1/queues/nothing", "").status)
	require.Equal(t, http.StatusOK, send(http.MethodPost, "/api/v1/queues/later/pause", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodGet, "/api/v1/queues/later", "").status)

	entries, err := b.store.ListAudit(b.ctx, domain.AuditQuery{Limit: 50})
	require.NoError(t, err)
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	require.Subset(t, actions, []string{"queue_pause", "queue_limits", "queue_resume"})
	for _, e := range entries {
		if e.Action == "queue_limits" && strings.Contains(string(e.Details), `"concurrency":3`) {
			require.Contains(t, string(e.Details), `"queue":"mail"`)
			require.Contains(t, string(e.Details), `"rate_limit":{"limit":20,"period_seconds":1}`)
		}
	}
}

// TestQueuesAPIRefusesBadBodies: a bad change to a queue gets a 4xx that
// names the field and says what to fix.
func TestQueuesAPIRefusesBadBodies(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	send := func(method, path, body string) page { return b.apiCall(t, method, path, body, "application/json") }
	b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"})
	var p page
	bad := []struct {
		path, body, field, words string
		status                   int
	}{
		{"/api/v1/queues/mail", `{}`, "body", "changes nothing", 422},
		{"/api/v1/queues/mail", `{"concurrency": 0}`, "concurrency", "whole number from 1", 422},
		{"/api/v1/queues/mail", `{"concurrency": 2.5}`, "concurrency", "whole number from 1", 422},
		{"/api/v1/queues/mail", `{"concurrency": "5"}`, "concurrency", "whole number from 1", 422},
		{"/api/v1/queues/mail", `{"concurrency": 100001}`, "concurrency", "100000", 422},
		{"/api/v1/queues/mail", `{"per_key_concurrency": -1}`, "per_key_concurrency", "whole number from 1", 422},
		{"/api/v1/queues/mail", `{"rate_limit": 20}`, "rate_limit", `{"limit": 20, "period_seconds": 1}`, 422},
		{"/api/v1/queues/mail", `{"rate_limit": {"limit": 20}}`, "rate_limit.period_seconds", "is required", 422},
		{"/api/v1/queues/mail", `{"rate_limit": {"period_seconds": 1}}`, "rate_limit.limit", "is required", 422},
		{"/api/v1/queues/mail", `{"rate_limit": {"limit": 0, "period_seconds": 1}}`, "rate_limit.limit", "whole number from 1", 422},
		{"/api/v1/queues/mail", `{"rate_limit": {"limit": 5, "period_seconds": 90000}}`, "rate_limit.period_seconds", "86400", 422},
		{"/api/v1/queues/mail", `{"rate_limit": {"limit": 5, "period_seconds": 1, "burst": 3}}`, "rate_limit.burst", "not part of a rate limit", 422},
		{"/api/v1/queues/mail", `{"paused": true}`, "paused", "not a queue setting", 422},
		{"/api/v1/queues/mail", `{"concurrency": `, "", "", 400},
		{"/api/v1/queues/mail", `[1]`, "", "", 400},
		{"/api/v1/queues/bad%20name", `{"concurrency": 1}`, "name", "letters, digits", 422},
	}
	for _, c := range bad {
		p := send(http.MethodPatch, c.path, c.body)
		require.Equal(t, c.status, p.status, "%s: %s", c.body, p.body)
		var e struct {
			Error struct {
				Field   string `json:"field"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.body), &e), p.body)
		require.NotEmpty(t, e.Error.Message)
		if c.field != "" {
			require.Equal(t, c.field, e.Error.Field, c.body)
			require.Contains(t, e.Error.Message, c.words, c.body)
		}
	}
	p = b.apiCall(t, http.MethodPatch, "/api/v1/queues/mail", `concurrency=1`, "application/x-www-form-urlencoded")
	require.Equal(t, http.StatusUnsupportedMediaType, p.status)
	p = send(http.MethodPost, "/api/v1/queues/bad%20name/pause", "")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
}

// TestQueuesPage: the page lists queues with their state and limits, its
// buttons pause and resume, and its form saves limits or answers 422 with
// what to fix and the form as typed.
func TestQueuesPage(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "reports"})
	p := b.request(t, http.MethodGet, "/queues", nil)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `data-queue="reports"`)
	require.Contains(t, p.body, `hx-post="/queues/reports/pause"`)

	p = b.hx(t, http.MethodPost, "/queues/reports/pause", url.Values{}, "queues-live")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `hx-post="/queues/reports/resume"`)
	require.True(t, b.store.QueuePaused("reports"))

	p = b.hx(t, http.MethodPost, "/queues/reports/limits", url.Values{"concurrency": {"4"}, "rate_limit": {"10"},
		"rate_period_seconds": {"60"}, "per_key_concurrency": {""}}, "queues-live")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "4 at once")
	require.Contains(t, p.body, "10 per 60 s")

	p = b.hx(t, http.MethodPost, "/queues/reports/limits", url.Values{"concurrency": {"lots"}, "rate_limit": {"10"},
		"rate_period_seconds": {""}}, "queues-live")
	require.Equal(t, http.StatusUnprocessableEntity, p.status, p.body)
	require.Contains(t, p.body, `data-testid="limit-error-concurrency"`, "the error is said under the field")
	require.Regexp(t, `Must be a whole number from 1 to [0-9]+, or leave it empty for no limit`, p.body)
	require.Contains(t, p.body, `value="lots"`, "the form keeps what was typed")

	p = b.hx(t, http.MethodPost, "/queues/reports/limits", url.Values{"concurrency": {""}, "rate_limit": {"10"},
		"rate_period_seconds": {""}}, "queues-live")
	require.Equal(t, http.StatusUnprocessableEntity, p.status, p.body)
	require.Contains(t, p.body, `data-testid="limit-error-rate_period_seconds"`)
	require.Contains(t, p.body, "Required: the length of the period in seconds")

	q, err := b.store.GetQueue(b.ctx, "reports")
	require.NoError(t, err)
	require.Equal(t, 4, *q.Concurrency, "refused forms change nothing")
	p = b.hx(t, http.MethodPost, "/queues/reports/resume", url.Values{}, "queues-live")
	require.Equal(t, http.StatusOK, p.status)
	require.False(t, b.store.QueuePaused("reports"))
}

// apiCall sends an API request with the key and, when given, a body.
func (b *dashBundle) apiCall(t *testing.T, method, path, body, contentType string) page {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("X-API-Key", apiKey)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := b.app.Test(req, 30_000)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}
