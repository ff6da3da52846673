package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestRetryingIsNotScheduled: a job waiting for its retry is counted as
// retrying, not scheduled, in the overview's and the queues' tables; the
// retrying list says when the next retry is and runs it now on request.
func TestRetryingIsNotScheduled(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "flaky", Queue: "billing"}) // its first run fails
	require.NoError(t, err)
	id := res[0].Job.ID
	waitStatus(t, rig.store, id, jobs.StateScheduled)
	// No promoter runs here: the retry waits for its time; make it an hour.
	_, err = rig.store.Pool().Exec(bg, `UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)

	cell := func(sel string) string {
		return eval[string](t, ctx, `document.querySelector('tr[data-queue="billing"] `+sel+`').textContent.trim()`)
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="billing"]`)))
	// The overview's counts are shared for a second (countsTTL): a page
	// loaded within it of the live refresh that followed the enqueue shows
	// the job still running, and the "stats" sent after the last move
	// corrects it. Wait for that, as an operator would see it.
	waitLive(t, ctx, 15*time.Second)
	waitJS(t, ctx, `(r => r && r.querySelector('[data-testid="queue-summary-retrying"]').textContent.trim() === '1' &&
		r.querySelector('td[data-label="Scheduled"]').textContent.trim() === '0')(document.querySelector('tr[data-queue="billing"]'))`, 15*time.Second)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/queues"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="billing"]`)))
	require.Equal(t, "1", cell(`[data-testid="queue-retrying"]`))
	shoot(t, ctx, "queues-retrying")

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=retrying"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="retry-now"]`)))
	waitLive(t, ctx, 15*time.Second)
	require.Contains(t, eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="jobs-table"] th')].map(th => th.textContent.trim())`), "Next retry")
	require.Equal(t, "in 59m", eval[string](t, ctx, `document.querySelector('[data-testid="job-next-run"]').textContent.trim()`))
	shoot(t, ctx, "jobs-retrying")
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="retry-now"]').click(), true)`))
	waitStatus(t, rig.store, id, jobs.StateCompleted)
	// It left the retrying list's filter: its row goes or says so.
	waitJS(t, ctx, `(r => !r || r.dataset.status !== 'retrying')(document.querySelector('tr[data-job-id="`+id.String()+`"]'))`, 20*time.Second)
	j, err := rig.store.GetJob(bg, id)
	require.NoError(t, err)
	require.Equal(t, 2, j.Attempt, "the retry ran at once, as its second attempt")
}
