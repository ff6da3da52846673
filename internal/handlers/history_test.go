package handlers_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/domain"
)

// TestJobsInTheHistoryThroughTheAPI: a job moved to the history reads the
// same through every API that shows a job, and the DLQ replay brings it
// back.
func TestJobsInTheHistoryThroughTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := deadJob(t, b.store, `{"n":1}`)
	require.NoError(t, b.store.InsertJobLogs(b.ctx, []domain.LogEntry{
		{JobID: j.ID, Attempt: 1, At: time.Now(), Level: "warn", Message: "about to fail"}}))
	path := "/api/v1/jobs/" + j.ID.String()
	before := b.do(t, http.MethodGet, path, "", "")
	require.Equal(t, http.StatusOK, before.status)
	logsBefore := b.do(t, http.MethodGet, path+"/logs", "", "")
	require.Equal(t, http.StatusOK, logsBefore.status)

	n, err := b.store.Archive(b.ctx, 0, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	after := b.do(t, http.MethodGet, path, "", "")
	require.Equal(t, http.StatusOK, after.status)
	require.JSONEq(t, string(before.body), string(after.body), "the job reads the same from the history")
	logsAfter := b.do(t, http.MethodGet, path+"/logs", "", "")
	require.JSONEq(t, string(logsBefore.body), string(logsAfter.body))
	require.Contains(t, string(logsAfter.body), "about to fail")
	ex := b.do(t, http.MethodGet, path+"/explain", "", "")
	require.Equal(t, http.StatusOK, ex.status, string(ex.body))
	require.Equal(t, "dead_letter", ex.json(t)["status"])

	for _, list := range []string{"/api/v1/jobs?status=dead_letter", "/api/v1/dlq", "/api/v1/jobs?queue=" + j.Queue} {
		r := b.do(t, http.MethodGet, list, "", "")
		require.Equal(t, http.StatusOK, r.status, list)
		require.Contains(t, string(r.body), j.ID.String(), list)
	}

	// Refused operations still name the state; a replay brings it back.
	r := b.do(t, http.MethodPost, path+"/cancel", "application/json", "")
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, string(r.body), "dead_letter")
	r = b.do(t, http.MethodPost, path+"/retry", "application/json", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	require.Equal(t, "queued", r.json(t)["status"])
}

// TestJobPageOfAJobInTheHistory: the job page of a job in the history shows
// its runs and its log, and the DLQ page lists it.
func TestJobPageOfAJobInTheHistory(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	j := deadJob(t, b.store, `{"n":1}`)
	require.NoError(t, b.store.InsertJobLogs(b.ctx, []domain.LogEntry{
		{JobID: j.ID, Attempt: 1, At: time.Now(), Level: "warn", Message: "about to <fail>"}}))
	n, err := b.store.Archive(b.ctx, 0, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	p := b.request(t, http.MethodGet, "/jobs/"+j.ID.String(), nil)
	require.Equal(t, http.StatusOK, p.status)
	doc, err := html.Parse(strings.NewReader(p.body))
	require.NoError(t, err)
	timeline := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "timeline" })
	require.Len(t, timeline, 1)
	runs := findAll(timeline[0], func(n *html.Node) bool { return n.Data == "li" })
	require.Len(t, runs, 1, "its one run")
	require.Contains(t, textOf(runs[0]), "boom")
	require.Contains(t, p.body, "about to &lt;fail&gt;")
	require.Contains(t, p.body, `data-testid="action-edit-replay"`)

	d := b.request(t, http.MethodGet, "/dlq", nil)
	require.Equal(t, http.StatusOK, d.status)
	require.Contains(t, d.body, j.ID.String())
}
