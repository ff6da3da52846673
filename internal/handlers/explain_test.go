package handlers_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// GET /api/v1/jobs/{id}/explain answers with reasons computed from the
// database; unknown and malformed ids get 404 and 400.
func TestExplainAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Delay: time.Hour})
	require.NoError(t, err)
	id := res[0].Job.ID

	r := b.do(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/explain", "", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	m := r.json(t)
	require.Equal(t, id.String(), m["job_id"])
	require.Equal(t, "scheduled", m["status"])
	reasons := m["reasons"].([]any)
	require.Len(t, reasons, 1)
	first := reasons[0].(map[string]any)
	require.Equal(t, "waiting_for_run_at", first["code"])
	require.Contains(t, first["message"], "Waiting for its run time")
	require.NotEmpty(t, first["at"])
	require.Equal(t, first["message"], m["summary"])

	r = b.do(t, http.MethodGet, "/api/v1/jobs/"+uuid.NewString()+"/explain", "", "")
	require.Equal(t, http.StatusNotFound, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/jobs/not-a-uuid/explain", "", "")
	require.Equal(t, http.StatusBadRequest, r.status)
	r = b.do(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/explain", "", "", "X-API-Key", "wrong-key")
	require.Equal(t, http.StatusUnauthorized, r.status)
}

// The job page opens with the same reasons, one list item each, and a job's
// own text in them (its last error) stays text.
func TestJobPageExplains(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	res, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "xq"})
	require.NoError(t, err)
	id := res[0].Job.ID
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w1", Limit: 1, LeaseTTL: time.Minute, Queues: []string{"xq"}})
	require.NoError(t, err)
	require.Len(t, claimed, 1)
	evil := `<img src=x onerror=alert('xssmark')>`
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(claimed[0]), Outcome: domain.OutcomeFailed,
		Error: evil, RetryDelay: time.Hour}})
	require.NoError(t, err)

	for _, path := range []string{"/jobs/" + id.String(), "/jobs/" + id.String() + "/live"} {
		p := b.request(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, p.status)
		checkNoInjection(t, path, p.body)
		doc, err := html.Parse(strings.NewReader(p.body))
		require.NoError(t, err)
		panels := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "explain" })
		require.Len(t, panels, 1, path)
		items := findAll(panels[0], func(n *html.Node) bool { return n.Data == "li" })
		require.Len(t, items, 1, path)
		require.Equal(t, "retry_backoff", attr(items[0], "data-reason"))
		text := textOf(items[0])
		require.Contains(t, text, "Attempt 1 of 4 failed; retry 2 runs at")
		require.Contains(t, text, evil, "the error is shown as text")
		heads := findAll(panels[0], func(n *html.Node) bool { return n.Data == "h2" })
		require.Equal(t, "Why it is scheduled", textOf(heads[0]))
	}
}

func textOf(n *html.Node) string {
	var sb strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			sb.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.TrimSpace(sb.String())
}

// Finished states are exact on the overview past its 100,000 cap (their
// counts are kept as jobs change), with no estimate label.
func TestOverviewCountsFinishedExactly(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	require.NoError(t, b.store.SeedHistory(b.ctx, db.History{Jobs: 110_000}, nil)) // 99,000 completed … plus
	require.NoError(t, b.store.SeedHistory(b.ctx, db.History{Jobs: 20_000}, nil))  // … 18,000 more: 117,000
	p := b.request(t, http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, p.status)
	doc, err := html.Parse(strings.NewReader(p.body))
	require.NoError(t, err)
	tile := func(state string) *html.Node {
		n := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "count-"+state })
		require.Len(t, n, 1, state)
		return n[0]
	}
	done := textOf(tile("completed"))
	require.Contains(t, done, "117,000")
	require.NotContains(t, done, "≈")
	require.NotContains(t, done, "estimate")
	require.Empty(t, findAll(tile("completed"), func(n *html.Node) bool { _, ok := attrOK(n, "data-estimate"); return ok }))
	dlq := textOf(tile("dead_letter"))
	require.Contains(t, dlq, "6,500")
	require.NotContains(t, dlq, "estimate")
}

func attrOK(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// The pending occurrence of a series paused or deleted says so, with who
// did it (the series action's audit entry names the occurrence), in its
// explanation and in its log; the job page's audit list shows the action.
func TestSeriesCancelAttributed(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	first := b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, IntervalSeconds: 3600, Delay: time.Hour})
	series := first.ScheduleID.String()
	p := b.apiCall(t, http.MethodPost, "/api/v1/recurring/"+series+"/pause", "", "")
	require.Equal(t, http.StatusOK, p.status, p.body)

	explained := func(id uuid.UUID) map[string]any {
		t.Helper()
		p := b.apiCall(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/explain", "", "")
		require.Equal(t, http.StatusOK, p.status, p.body)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(p.body), &m))
		return m
	}
	logged := func(id uuid.UUID) []string {
		t.Helper()
		p := b.apiCall(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/logs", "", "")
		require.Equal(t, http.StatusOK, p.status, p.body)
		var m struct {
			Entries []domain.LogEntry `json:"entries"`
		}
		require.NoError(t, json.Unmarshal([]byte(p.body), &m))
		var out []string
		for _, e := range m.Entries {
			out = append(out, e.Source+": "+e.Message)
		}
		return out
	}
	m := explained(first.ID)
	r := m["reasons"].([]any)[0].(map[string]any)
	require.Equal(t, "cancelled_by_series", r["code"])
	require.Contains(t, m["summary"], "when its recurring series was paused by key:FLINT_API_KEY (api); this occurrence never ran.")
	require.NotContains(t, m["summary"], "handler")
	require.Equal(t, []string{"flint: Cancelled before it ran: its recurring series was paused by key:FLINT_API_KEY (api)."}, logged(first.ID))
	page := b.request(t, http.MethodGet, "/jobs/"+first.ID.String(), nil)
	require.Equal(t, http.StatusOK, page.status)
	require.Contains(t, page.body, `data-reason="cancelled_by_series"`)
	require.Contains(t, page.body, "series_pause")

	// Resumed from the dashboard, then deleted from it: the new occurrence,
	// unlinked from the series by the deletion, names the person.
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series+"/resume", nil, "recurring-table").status)
	var next uuid.UUID
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM jobs WHERE schedule_id = $1 AND status = 'scheduled'`,
		*first.ScheduleID).Scan(&next))
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series+"/delete", nil, "recurring-table").status)
	m = explained(next)
	require.Equal(t, "cancelled_by_series", m["reasons"].([]any)[0].(map[string]any)["code"])
	require.Contains(t, m["summary"], "when its recurring series was deleted by "+adminEmail+" (dashboard);")
	require.Equal(t, []string{"flint: Cancelled before it ran: its recurring series was deleted by " + adminEmail + " (dashboard)."}, logged(next))
}
