package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestOverviewInABrowser: the overview shows a firing alert on top, jobs
// waiting to retry as retrying (not scheduled), a per-queue summary, and
// recent failures with long errors that do not scroll sideways.
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestOverviewInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()

	// A failure for good with a long error, and one that will be retried.
	zero, three := 0, 3
	long := strings.Repeat("the upstream answered with something nobody expected ", 12)
	dead, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "fail", Queue: "reports", MaxRetries: &zero,
		Payload: []byte(`{"message": "` + long + `"}`)})
	require.NoError(t, err)
	retry, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "fail", Queue: "reports", MaxRetries: &three,
		Payload: []byte(`{"message": "flaky"}`)})
	require.NoError(t, err)
	waitStatus(t, rig.store, dead[0].Job.ID, jobs.StateDeadLetter)
	waitStatus(t, rig.store, retry[0].Job.ID, jobs.StateScheduled)

	// A queue whose oldest job has waited ten minutes, and a rule that fires on it.
	_, err = rig.store.UpdateQueue(bg, "imports", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	require.NoError(t, err)
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "imports"})
	require.NoError(t, err)
	_, err = rig.store.Pool().Exec(bg, `UPDATE jobs SET run_at = now() - interval '10 minutes', created_at = now() - interval '10 minutes' WHERE queue = 'imports'`)
	require.NoError(t, err)
	_, err = rig.store.CreateAlertRule(bg, domain.AlertRule{Name: "imports waiting", Kind: domain.AlertQueueLatency, Queue: "imports",
		Threshold: 60, WindowSeconds: 300, MinRuns: 1, GraceSeconds: 60, CooldownSeconds: 3600, Emails: []string{"ops@example.com"}, Enabled: true})
	require.NoError(t, err)
	ok, _, err := rig.store.EvaluateAlertRules(bg, time.Minute, notifier(t, nil, nil).Render)
	require.NoError(t, err)
	require.True(t, ok)
	firing, err := rig.store.ListAlerts(bg, domain.AlertQuery{Status: "firing", Limit: 10})
	require.NoError(t, err)
	require.Len(t, firing, 1, "the rule fired")

	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="counts"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.Equal(t, []string{"imports waiting"}, eval[[]string](t, ctx,
		`[...document.querySelectorAll('[data-testid="overview-alert"] a')].map(a => a.textContent)`))
	stat := func(name string) string {
		return eval[string](t, ctx, `document.querySelector('[data-testid="count-`+name+`"] .stat-value').textContent.trim()`)
	}
	require.Equal(t, 1, count(t, ctx, `[data-testid="count-scheduled"]`))
	require.Equal(t, 12, count(t, ctx, `[data-testid="counts"] > .stat`), "a card per state (claimed among them), retrying, sleeping, and workers online")
	// Counts are cached for a second behind the page: within a moment
	// they show the retry.
	waitJS(t, ctx, `document.querySelector('[data-testid="count-retrying"] .stat-value').textContent.trim() === '1'`, 5*time.Second)
	require.Equal(t, "0", stat("scheduled"), "the job waiting to retry is not counted as scheduled")

	// The queue summary comes from the same cached counts: the paused
	// queue's row may arrive with the next refresh.
	waitJS(t, ctx, `[...document.querySelectorAll('[data-testid="queue-summary-row"][data-queue="imports"] td[data-label="State"]')]
		.some(td => td.textContent.includes('paused'))`, 10*time.Second)
	type row struct{ Queue, State string }
	rows := eval[[]row](t, ctx, `[...document.querySelectorAll('[data-testid="queue-summary-row"]')].map(r => ({
		Queue: r.dataset.queue, State: r.querySelector('td[data-label="State"]').textContent.trim()}))`)
	got := map[string]string{}
	for _, r := range rows {
		got[r.Queue] = r.State
	}
	require.Contains(t, got["imports"], "paused")
	require.Contains(t, got, "reports")

	// Recent failures fit their card at 1400 px, the time included.
	fits := `(() => { const w = document.querySelector('[data-testid="recent-failures"]').closest('.table-wrap');
		const when = document.querySelector('[data-testid="recent-failures"] td[data-label="When"]');
		const card = w.closest('.card').getBoundingClientRect();
		return w.scrollWidth <= w.clientWidth && when.getBoundingClientRect().right <= card.right; })()`
	require.True(t, eval[bool](t, ctx, fits), "the recent-failures card scrolls sideways or clips the time")
	// Each row's cells end with the row: their borders make one line.
	ragged := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="failure-row"]')].flatMap(r => {
		const bottom = r.getBoundingClientRect().bottom;
		return [...r.cells].filter(td => Math.abs(td.getBoundingClientRect().bottom - bottom) > 1).map(td => r.dataset.jobId + ' ' + td.dataset.label);
	})`)
	require.Empty(t, ragged, "cells that end above their row")
	shoot(t, ctx, "overview")

	// The chart's range: 24 hours, kept by the live updates that follow.
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="chart-ranges"] a[data-range="24h"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="throughput-chart"][data-range="24h"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `(window.__chartBefore = document.querySelector('[data-testid="throughput-chart"]'), true)`))
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "reports"})
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelector('[data-testid="throughput-chart"]') !== window.__chartBefore`, 10*time.Second)
	require.Equal(t, "24h", eval[string](t, ctx, `document.querySelector('[data-testid="throughput-chart"]').dataset.range`),
		"a live update keeps the chosen range")
	require.Equal(t, 96, eval[int](t, ctx, `+document.querySelector('[data-testid="throughput-chart"]').dataset.bars`))
	shoot(t, ctx, "overview-24h")

	// The retried job's row in the jobs list says retrying; the filter finds it.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=retrying"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	require.Equal(t, []string{retry[0].Job.ID.String()}, eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`))
	require.Equal(t, "retrying", eval[string](t, ctx, `document.querySelector('tr[data-job-id]').dataset.status`))
}
