package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestJobPageRunsAndHistoryInABrowser: a job replayed twice from its page
// ran three times, each at attempt 1; its log labels each line with its
// run (#1, #2, #3, as the attempts card numbers them), not the attempt
// number every run shares, and its History table of operator actions,
// long details included, fits its card at 1400 and 375 px.
func TestJobPageRunsAndHistoryInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t, registerBoom)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	zero := 0
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "boom", MaxRetries: &zero})
	require.NoError(t, err)
	id := res[0].Job.ID
	for i := range 2 {
		waitStatus(t, rig.store, id, jobs.StateDeadLetter)
		within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/jobs/"+id.String()),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="action-retry"]`)))
		clickBound(t, ctx, `[data-testid="action-retry"]`, `[data-testid="action-retry"]`)
		waitFor(t, 10*time.Second, "the replay to run", func() bool {
			j, err := rig.store.GetJob(bg, id)
			require.NoError(t, err)
			return j.Executions >= i+2
		})
	}
	waitFor(t, 20*time.Second, "the third run to fail", func() bool {
		j, err := rig.store.GetJob(bg, id)
		require.NoError(t, err)
		return j.Status == jobs.StateDeadLetter && j.Executions == 3
	})
	details, err := json.Marshal(map[string]any{"payload_before": map[string]string{"customer": "cus_0123456789abcdefghijklmnopqrstuvwxyz", "note": longError},
		"payload_after": map[string]string{"customer": "cus_0123456789abcdefghijklmnopqrstuvwxyz", "note": "fixed: " + longError}})
	require.NoError(t, err)
	require.NoError(t, rig.store.RecordAudit(bg, domain.AuditEntry{Actor: "a.very.long.operator.name@operations.example.com", Source: "dashboard",
		IP: "2001:db8:85a3::8a2e:370:7334", Action: "edit_and_replay", Details: details}, id))

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+id.String()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-log"] li`)))
	require.Equal(t, []string{"#1", "#1", "#2", "#2", "#3", "#3"},
		eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="log-run"]')].map(e => e.textContent.trim())`))
	require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll('[data-testid="job-history"] [data-testid="audit-row"]').length`), "two replays and the edit")
	fits := `(() => { const c = document.querySelector('[data-testid="job-history"]');
		return [...c.querySelectorAll('.table-wrap, table')].every(e => e.scrollWidth <= c.clientWidth && e.scrollWidth <= e.clientWidth + 1); })()`
	require.True(t, eval[bool](t, ctx, fits), "the History table fits its card at 1400 px")
	within(t, ctx, 10*time.Second, chromedp.EmulateViewport(375, 900))
	require.True(t, eval[bool](t, ctx, fits), "the History table fits its card at 375 px")
	within(t, ctx, 10*time.Second, chromedp.EmulateViewport(1400, 900))
	shoot(t, ctx, "job-history")
}
