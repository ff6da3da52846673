package handlers_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func TestJobLogsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "lq"})
	require.NoError(t, err)
	id := res[0].Job.ID
	c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w-log", Limit: 1, LeaseTTL: time.Minute, Queues: []string{"lq"}})
	require.NoError(t, err)
	now := time.Now()
	var lines []domain.LogEntry
	for i := range 3 {
		lines = append(lines, domain.LogEntry{JobID: id, Attempt: 1, At: now.Add(time.Duration(i) * time.Millisecond), Level: "info",
			Message: "step " + string(rune('a'+i)), Attrs: map[string]any{"i": i}})
	}
	require.NoError(t, b.store.InsertJobLogs(b.ctx, lines))
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSucceeded}})
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
	c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w-p", Limit: 1, LeaseTTL: time.Minute, Queues: []string{"pq"}})
	require.NoError(t, err)
	_, err = b.store.ExtendLeases(b.ctx, []domain.Heartbeat{{Lease: domain.LeaseOf(c[0]),
		Progress: &domain.Progress{Percent: 65, Message: "<b>xssmark</b> rows"}}}, time.Minute)
	require.NoError(t, err)
	evil := `<img src=x onerror=alert('xssmark')>`
	require.NoError(t, b.store.InsertJobLogs(b.ctx, []domain.LogEntry{{JobID: id, Attempt: 1, At: time.Now(), Level: "warn", Message: evil}}))

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

	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSucceeded}})
	require.NoError(t, err)
	p := b.request(t, http.MethodGet, "/jobs/"+id.String()+"/log", nil)
	doc, err := html.Parse(strings.NewReader(p.body))
	require.NoError(t, err)
	cards := findAll(doc, func(n *html.Node) bool { return attr(n, "data-testid") == "job-log" })
	require.Len(t, cards, 1)
	require.Empty(t, attr(cards[0], "hx-get"), "a finished job's log stops polling")
	require.Len(t, findAll(cards[0], func(n *html.Node) bool { return n.Data == "li" }), 3)
}

// Lines the job's row implies are derived too: a failed attempt says when
// it will be retried, and a job cancelled while it waited (never run, or
// between runs) gets a line saying so, and by whom when the audit trail
// knows.
func TestJobLogLinesFromTheJobRow(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	type logPage struct {
		Entries   []domain.LogEntry `json:"entries"`
		NextAfter int64             `json:"next_after"`
	}
	read := func(id uuid.UUID, query string) logPage {
		t.Helper()
		p := b.apiCall(t, http.MethodGet, "/api/v1/jobs/"+id.String()+"/logs"+query, "", "")
		require.Equal(t, http.StatusOK, p.status, p.body)
		var out logPage
		require.NoError(t, json.Unmarshal([]byte(p.body), &out))
		return out
	}
	messages := func(es []domain.LogEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Message)
		}
		return out
	}

	// Cancelled before it ran, through the API: by the bootstrap key.
	waiting := b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "lw", Delay: time.Hour})
	p := b.apiCall(t, http.MethodPost, "/api/v1/jobs/"+waiting.ID.String()+"/cancel", "", "")
	require.Equal(t, http.StatusOK, p.status, p.body)
	got := read(waiting.ID, "").Entries
	require.Len(t, got, 1)
	require.Equal(t, "Cancelled before it ran, by key:FLINT_API_KEY (api).", got[0].Message)
	require.Equal(t, domain.LogFromFlint, got[0].Source)
	require.Equal(t, "warn", got[0].Level)

	// Cancelled with nothing on the audit trail (from Go, say).
	quiet := b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "lq", Delay: time.Hour})
	_, err := b.store.CancelJob(b.ctx, quiet.ID)
	require.NoError(t, err)
	require.Equal(t, []string{"Cancelled before it ran."}, messages(read(quiet.ID, "").Entries))

	// A failed attempt with retries left says when the next one runs,
	// before and after the retry comes due.
	j := b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "lr"})
	c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w-r", Limit: 1, LeaseTTL: time.Minute, Queues: []string{"lr"}})
	require.NoError(t, err)
	require.Len(t, c, 1)
	_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeFailed,
		Error: "upstream said 503", RetryDelay: time.Hour}})
	require.NoError(t, err)
	require.NoError(t, b.store.InsertJobLogs(b.ctx, []domain.LogEntry{{JobID: j.ID, Attempt: 1, At: time.Now().Add(-time.Hour),
		Level: "info", Message: "calling upstream"}}))
	failed, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	retryAt := failed.RunAt.UTC().Format(time.RFC3339)
	lines := messages(read(j.ID, "").Entries)
	require.Len(t, lines, 3)
	require.Equal(t, "calling upstream", lines[0])
	require.Contains(t, lines[2], ": upstream said 503. Will retry at "+retryAt+" (attempt 2 of 4).")
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE jobs SET status = 'queued' WHERE id = $1`, j.ID) // promoted
	require.NoError(t, err)
	require.Contains(t, messages(read(j.ID, "").Entries)[2], "Will retry at "+retryAt+" (attempt 2 of 4).")

	// Cancelled while it waited for that retry: the failure no longer
	// promises one, and the cancel has its own line, last.
	p = b.apiCall(t, http.MethodPost, "/api/v1/jobs/"+j.ID.String()+"/cancel", "", "")
	require.Equal(t, http.StatusOK, p.status, p.body)
	first := read(j.ID, "")
	lines = messages(first.Entries)
	require.Len(t, lines, 4)
	require.True(t, strings.HasSuffix(lines[2], ": upstream said 503."), lines[2])
	require.Equal(t, "Cancelled while it waited to run again, by key:FLINT_API_KEY (api).", lines[3])
	require.Equal(t, 1, first.Entries[3].Attempt)

	// A later page holds stored lines only: the derived ones are not repeated.
	require.Empty(t, read(j.ID, "?after="+strconv.FormatInt(first.NextAfter, 10)).Entries)
}

// TestJobErrorsAndLogsAreScrubbed: a handler's error that quotes a
// connection string or a password, and log lines that do, reach the job's
// API (last_error, its runs, its log) scrubbed by the rules of the process
// log, whether they were stored now (scrubbed on the way in) or by an
// older version that stored them whole (scrubbed on the way out).
func TestJobErrorsAndLogsAreScrubbed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const leaky = `connect to postgres://app:s3cr3tpw@db.internal:5432/app failed: password=hunter2xyz, "api_key":"k-9f8e7d6c"`
	secrets := []string{"s3cr3tpw", "hunter2xyz", "k-9f8e7d6c"}
	run := func(queue string) uuid.UUID {
		t.Helper()
		res, err := b.store.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: queue})
		require.NoError(t, err)
		id := res[0].Job.ID
		c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w-scrub", Limit: 1, LeaseTTL: time.Minute, Queues: []string{queue}})
		require.NoError(t, err)
		require.NoError(t, b.store.InsertJobLogs(b.ctx, []domain.LogEntry{{JobID: id, Attempt: 1, At: time.Now(), Level: "error",
			Message: "giving up: " + leaky, Attrs: map[string]any{"detail": leaky}}}))
		// What the pool writes when the handler returns the error.
		_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeFailed, Error: leaky, RetryDelay: time.Hour}})
		require.NoError(t, err)
		return id
	}
	check := func(id uuid.UUID, what string) {
		t.Helper()
		for _, path := range []string{"/api/v1/jobs/" + id.String(), "/api/v1/jobs/" + id.String() + "/logs"} {
			r := b.do(t, http.MethodGet, path, "", "")
			require.Equal(t, http.StatusOK, r.status, string(r.body))
			for _, s := range secrets {
				require.NotContains(t, string(r.body), s, "%s: %s", what, path)
			}
			require.Contains(t, string(r.body), "[REDACTED]", "%s: %s still says what failed", what, path)
			require.Contains(t, string(r.body), "db.internal:5432", "%s: %s", what, path)
		}
	}

	id := run("scrub-new")
	check(id, "stored now")
	conn, err := pgx.Connect(b.ctx, b.dsn)
	require.NoError(t, err)
	defer conn.Close(b.ctx)
	var stored string
	require.NoError(t, conn.QueryRow(b.ctx, `SELECT last_error || (SELECT string_agg(coalesce(error, ''), '') FROM job_executions WHERE job_id = $1)
		|| (SELECT string_agg(message || attrs::text, '') FROM job_logs WHERE job_id = $1) FROM jobs WHERE id = $1`, id).Scan(&stored))
	for _, s := range secrets {
		require.NotContains(t, stored, s, "the database keeps no secret")
	}

	// Rows an older version stored whole.
	old := run("scrub-old")
	_, err = conn.Exec(b.ctx, `UPDATE jobs SET last_error = $2 WHERE id = $1`, old, leaky)
	require.NoError(t, err)
	_, err = conn.Exec(b.ctx, `UPDATE job_executions SET error = $2 WHERE job_id = $1`, old, leaky)
	require.NoError(t, err)
	_, err = conn.Exec(b.ctx, `UPDATE job_logs SET message = $2, attrs = jsonb_build_object('detail', $2::text) WHERE job_id = $1`, old, leaky)
	require.NoError(t, err)
	check(old, "stored whole before")
}
