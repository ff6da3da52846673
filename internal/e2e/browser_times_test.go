package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestJobsListTimesKeepTime: the relative times of a Jobs list that has
// been open a long while stay true after live updates. The table keeps
// the server's time it was rendered at (data-now) while its rows are
// swapped one by one; read again at each swap, it set the page's clock
// back by the page's age, and rows read "7s ago" for minutes, or started
// "in 12s".
func TestJobsListTimesKeepTime(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	_, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "times", RunAt: ptrTo(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?queue=times"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	waitLive(t, ctx, 10*time.Second)
	next := `document.querySelector('[data-testid="job-next-run"]').textContent.trim()`
	waitJS(t, ctx, next+` === 'in 59m'`, 5*time.Second)

	// The page was rendered an hour ago, as far as its table knows; a
	// live update swaps parts of it.
	require.True(t, eval[bool](t, ctx, `(document.querySelector('#jobs-table').dataset.now = new Date(Date.now() - 3600e3).toISOString(), true)`))
	require.True(t, eval[bool](t, ctx, `(window.__counts = document.querySelector('#status-counts'), true)`))
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "times", RunAt: ptrTo(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelector('#status-counts') !== window.__counts`, 10*time.Second)
	// The clock ticks every second: two ticks after the swap.
	time.Sleep(2100 * time.Millisecond)
	require.Equal(t, "in 59m", eval[string](t, ctx, next), "the run time an hour ahead, not two")
}
