package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestDLQCountsFollowFiltersLive: the dead-letter queue's count is the
// count of what its filter shows (of how many in all), moves live as jobs
// fail, and reads zero beside the empty table after "Delete all".
func TestDLQCountsFollowFiltersLive(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	zero := 0
	fail := func(queue string) {
		res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "fail", Queue: queue, MaxRetries: &zero,
			Payload: []byte(`{"message": "card declined"}`)})
		require.NoError(t, err)
		waitStatus(t, rig.store, res[0].Job.ID, jobs.StateDeadLetter)
	}
	for _, q := range []string{"billing", "billing", "billing", "default", "default"} {
		fail(q)
	}
	total := `document.querySelector('[data-testid="dlq-total"]').textContent.replace(/\s+/g, ' ').trim()`

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?queue=billing"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="dlq-total"]`)))
	waitLive(t, ctx, 15*time.Second)
	require.Equal(t, "3 jobs of 5 in the queue", eval[string](t, ctx, total))
	require.Len(t, eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`), 3)
	shoot(t, ctx, "dlq-filtered-count")

	fail("billing") // counted live, without a reload
	waitJS(t, ctx, total+` === '4 jobs of 6 in the queue'`, 20*time.Second)
	fail("default") // another queue's: only the whole queue's size moves
	waitJS(t, ctx, total+` === '4 jobs of 7 in the queue'`, 20*time.Second)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="delete-all"]`)))
	require.Equal(t, "7 jobs", eval[string](t, ctx, total))
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="delete-all"]').click(), true)`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="jobs-table"] [data-testid="empty"]')`, 15*time.Second)
	require.Equal(t, "0 jobs", eval[string](t, ctx, total), "the count beside the empty table")
}
