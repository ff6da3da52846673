package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestDLQTriageInABrowser: the dead-letter queue says how many jobs it
// holds, groups them by error with a way to each group's jobs, searches
// and filters, lists oldest first, jumps to a time, and deletes all (after
// a confirmation) into the bin.
func TestDLQTriageInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	zero := 0
	var first, last string
	for i := range 7 {
		msg := "smtp: 550 no such user"
		if i%3 == 2 {
			msg = "connection refused"
		}
		res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "fail", MaxRetries: &zero,
			Payload: []byte(fmt.Sprintf(`{"message": %q}`, msg))})
		require.NoError(t, err)
		waitStatus(t, rig.store, res[0].Job.ID, jobs.StateDeadLetter)
		if i == 0 {
			first = res[0].Job.ID.String()
		}
		last = res[0].Job.ID.String()
	}
	rowIDs := `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dlq-total"]`)))
	require.Equal(t, "7 jobs", eval[string](t, ctx, `document.querySelector('[data-testid="dlq-total"]').textContent.trim()`))
	require.Equal(t, last, eval[[]string](t, ctx, rowIDs)[0], "newest first")

	// Grouped by error, largest group first; a group leads to its jobs.
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="dlq-view-errors"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dlq-groups"]`)))
	type group struct{ Count, Error string }
	groups := eval[[]group](t, ctx, `[...document.querySelectorAll('[data-testid="dlq-group"]')].map(r => ({
		Count: r.querySelector('[data-testid="dlq-group-count"]').textContent.trim(),
		Error: r.querySelector('[data-testid="dlq-group-error"]').textContent.trim()}))`)
	require.Len(t, groups, 2)
	require.Equal(t, group{"5", "smtp: 550 no such user"}, groups[0])
	require.Equal(t, "2", groups[1].Count)
	require.True(t, strings.HasPrefix(groups[1].Error, "connection refused"), groups[1].Error)
	shoot(t, ctx, "dlq-groups")
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="dlq-group"]:nth-child(2) [data-testid="dlq-group-show"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	require.Len(t, eval[[]string](t, ctx, rowIDs), 2, "the group's two jobs")
	for _, e := range eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-job-id] td[data-label="Error"]')].map(td => td.textContent)`) {
		require.Contains(t, e, "connection refused")
	}

	// Oldest first.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?sort=oldest"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, first, eval[[]string](t, ctx, rowIDs)[0], "oldest first")
	require.Equal(t, "oldest", eval[string](t, ctx, `document.querySelector('[data-testid="dlq-sort"]').value`))

	// A jump to a time before any of them: nothing; a bad time says what to give.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?before=2020-01-01T00:00"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="empty"]`)))
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?before=yesterday"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"] [role="alert"]`)))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="jobs-table"] [role="alert"]').textContent`), "such as 2026-12-01T09:30")
	shoot(t, ctx, "dlq-jobs")

	// Delete all: confirmed (the test's browser accepts), all in the bin.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="delete-all"]`)))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="delete-all"]').closest('form').getAttribute('hx-confirm')`), "Move all 7 jobs")
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="delete-all"]').click(), true)`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="jobs-table"] [data-testid="empty"]')`, 15*time.Second)
	page, err := rig.store.ListJobs(context.Background(), domain.ListParams{InBin: true})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 7)
}
