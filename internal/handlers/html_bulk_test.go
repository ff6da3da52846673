package handlers_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// TestBulkOnAFilterIsBounded: an action on every job a filter shows
// touches at most views.BulkMax of them, the first in the list's order,
// says so, and takes the rest when run again; a filter it cannot apply is
// refused naming it, with nothing done.
func TestBulkOnAFilterIsBounded(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	ps := make([]jobs.EnqueueParams, views.BulkMax+1)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Type: "noop", Queue: "bulk"}
	}
	_, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
	other := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: "other"})
	// Dead-letter jobs, as a failure leaves them.
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE jobs SET status = 'dead_letter', attempt = 1, finished_at = now() - (random() * interval '1 hour')`)
	require.NoError(t, err)
	deadIn := func(queue string) int {
		t.Helper()
		var n int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE queue = $1 AND status = 'dead_letter'`, queue).Scan(&n))
		return n
	}

	p := b.hx(t, http.MethodPost, "/dlq/replay-all", url.Values{"queue": {"bulk"}, "scope": {"filter"}}, "jobs-table")
	require.Equal(t, http.StatusOK, p.status, p.body)
	toast := p.header.Get("HX-Trigger")
	require.Contains(t, toast, "Replayed: 5000 of the 5000 jobs the filter showed.")
	require.Contains(t, toast, "One action touches at most 5,000 jobs: run it again for the rest.")
	require.Equal(t, 1, deadIn("bulk"))
	require.Equal(t, 1, deadIn("other"), "another queue's job is left")
	// The one left is the earliest failure: the list's last.
	var last string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM jobs WHERE queue = 'bulk' AND status = 'dead_letter'`).Scan(&last))
	var earliest string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM jobs WHERE queue = 'bulk' ORDER BY finished_at LIMIT 1`).Scan(&earliest))
	require.Equal(t, earliest, last)
	audit, err := b.store.ListAudit(b.ctx, domain.AuditQuery{Limit: 500})
	require.NoError(t, err)
	require.Len(t, audit, 500, "one entry per job")
	require.Equal(t, "dlq_replay", audit[0].Action)
	require.JSONEq(t, `{"scope": "filter", "filter": {"list": "dlq", "queue": "bulk"}, "matched": 5000, "done": 5000, "more": true}`, string(audit[0].Details))

	p = b.hx(t, http.MethodPost, "/dlq/replay-all", url.Values{"queue": {"bulk"}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "Replayed: 1 of the 1 jobs the filter showed.")
	require.NotContains(t, p.header.Get("HX-Trigger"), "run it again")
	require.Zero(t, deadIn("bulk"))
	p = b.hx(t, http.MethodPost, "/dlq/replay-all", url.Values{"queue": {"bulk"}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "nothing was done")

	// Refused, naming what is wrong: nothing done.
	for _, bad := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/dlq/delete-all", url.Values{"sort": {"size"}}, "Unknown order"},
		{"/jobs/bulk", url.Values{"scope": {"filter"}, "action": {"cancel"}, "status": {"asleep"}}, "Unknown status"},
		{"/jobs/bulk", url.Values{"scope": {"filter"}, "action": {"cancel"}, "before": {"yesterday"}}, "Cannot jump"},
		{"/bin/bulk", url.Values{"scope": {"filter"}, "action": {"purge"}}, "Unknown action"},
	} {
		p := b.hx(t, http.MethodPost, bad.path, bad.form, "jobs-table")
		require.Equal(t, http.StatusUnprocessableEntity, p.status, bad.path)
		require.Contains(t, p.header.Get("HX-Trigger"), bad.want, bad.path)
	}
	require.Equal(t, 1, deadIn("other"))
	j, err := b.store.GetJob(b.ctx, other.ID)
	require.NoError(t, err)
	require.Nil(t, j.DeletedAt)
}
