package handlers_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"flint/jobs"
)

func TestJobLogsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "lq"})
	require.NoError(t, err)
	id := res[0].Job.ID
	c, err := b.store.ClaimJobs(b.ctx, jobs.ClaimParams{WorkerID: "w-log", Limit: 1, LeaseTTL: time.Minute, Queues: []string{"lq"}})
	require.NoError(t, err)
	now := time.Now()
	var lines []jobs.LogEntry
	for i := range 3 {
		lines = append(lines, jobs.LogEntry{JobID: id, Attempt: 1, At: now.Add(time.Duration(i) * time.Millisecond), Level: "info",
			Message: "step " + string(rune('a'+i)), Attrs: map[string]any{"i": i}})
	}
	require.NoError(t, b.store.InsertJobLogs(b.ctx, lines))
	_, _, err = b.store.FinishJobs(b.ctx, []jobs.Finish{{Lease: jobs.LeaseOf(c[0]), Outcome: jobs.OutcomeSucceeded}})
	require.NoError(t, err)

	r := b.do(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/logs", "", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	m := r.json(t)
	entries := m["entries"].([]any)
	require.Len(t, entries, 5, "claimed, three handler lines, succeeded")
	first, last := entries[0].(map[string]any), entries[4].(map[string]any)
	require.Equal(t, "flint", first["source"])
	require.Contains(t, first["message"], "Claimed by worker w-log (attempt 1 of 4)")
	require.Equal(t, "flint", last["source"])
	require.Contains(t, last["message"], "Succeeded in")
	require.Equal(t, "handler", entries[1].(map[string]any)["source"])
	require.Equal(t, "step a", entries[1].(map[string]any)["message"])
	next := m["next_after"].(float64)
	require.Positive(t, next)

	// The next page holds handler lines only, and none are left.
	r = b.do(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/logs?after="+strconv.FormatInt(int64(next), 10), "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.json(t)["entries"])

	r = b.do(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/logs?limit=2", "", "")
	require.Len(t, r.json(t)["entries"].([]any), 4, "two handler lines and the lifecycle lines")
	for _, bad := range []string{"?after=-1", "?after=x", "?limit=0", "?limit=5001"} {
		r = b.do(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/logs"+bad, "", "")
		require.Equal(t, http.StatusUnprocessableEntity, r.status, bad)
	}
	r = b.do(t, http.MethodGet, "/api/v1/jobs/"+uuid.NewString()+"/logs", "", "")
	require.Equal(t, http.StatusNotFound, r.status)
}

// The job page shows a running job's progress and its log, the log card
// polling while the job runs; a job's own text stays text.
func TestJobPageShowsProgressAndLog(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	res, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "pq"})
	require.NoError(t, err)
	id := res[0].Job.ID
	c, err := b.store.ClaimJobs(b.ctx, jobs.ClaimParams{WorkerID: "w-p", Limit: 1, LeaseTTL: time.Minute, Queues: []string{"pq"}})
	require.NoError(t, err)
	_, err = b.store.ExtendLeases(b.ctx, []jobs.Heartbeat{{Lease: jobs.LeaseOf(c[0]),
		Progress: &jobs.Progress{Percent: 65, Message: "<b>xssmark</b> rows"}}}, time.Minute)
	require.NoError(t, err)
	evil := `<img src=x onerror=alert('xssmark')>`
	require.NoError(t, b.store.InsertJobLogs(b.ctx, []jobs.LogEntry{{JobID: id, Attempt: 1, At: time.Now(), Level: "warn", Message: evil}}))

	for _, path := range []string{"/jobs/" + id.String(), "/jobs/" + id.String() + "/log"} {
		p := b.request(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, p.status, path)
		checkNoInjection(t, path, p.body)
		doc, err := html.Parse(strings.NewReader(p.body))
		require.NoError(t, err)
		cards := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "job-log" })
		require.Len(t, cards, 1, path)
		require.Equal(t, "/jobs/"+id.String()+"/log", attr(cards[0], "hx-get"), "a running job's log polls")
		items := findAll(cards[0], func(n *html.Node) bool { return n.Data == "li" })
		require.Len(t, items, 2, "the claim and the handler's line")
		require.Equal(t, "flint", attr(items[0], "data-source"))
		require.Equal(t, "handler", attr(items[1], "data-source"))
		require.Contains(t, textOf(items[1]), evil)
		if !strings.HasSuffix(path, "/log") {
			bars := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "progress" })
			require.Len(t, bars, 1)
			require.Contains(t, textOf(bars[0]), "65%")
			require.Contains(t, textOf(bars[0]), "<b>xssmark</b> rows")
		}
	}

	_, _, err = b.store.FinishJobs(b.ctx, []jobs.Finish{{Lease: jobs.LeaseOf(c[0]), Outcome: jobs.OutcomeSucceeded}})
	require.NoError(t, err)
	p := b.request(t, http.MethodGet, "/jobs/"+id.String()+"/log", nil)
	doc, err := html.Parse(strings.NewReader(p.body))
	require.NoError(t, err)
	cards := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "job-log" })
	require.Len(t, cards, 1)
	require.Empty(t, attr(cards[0], "hx-get"), "a finished job's log stops polling")
	require.Len(t, findAll(cards[0], func(n *html.Node) bool { return n.Data == "li" }), 3)
}
