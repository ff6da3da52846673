package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestSleepingApartInTheJobsList: the jobs list filters jobs that sleep
// apart from those waiting for a signal (and both apart from queued and
// running ones), counts them apart, and the overview's sleeping count
// leads to the sleeping ones.
func TestSleepingApartInTheJobsList(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t, registerAwaitApproval, func(r *jobs.Registry) {
		r.Register("nap", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
			return nil, jobs.Sleep(ctx, "nap", time.Hour)
		}))
	})
	bg := context.Background()
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "nap"}, jobs.EnqueueParams{Type: "await-approval"},
		jobs.EnqueueParams{Type: jobs.TypeNoop, RunAt: new(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	napper, waiter := res[0].Job.ID.String(), res[1].Job.ID.String()
	waitStatus(t, rig.store, res[0].Job.ID, jobs.StateWaiting)
	waitStatus(t, rig.store, res[1].Job.ID, jobs.StateWaiting)

	ctx := browser(t)
	signIn(t, ctx, rig.base)
	require.Equal(t, "/jobs?status=sleeping", eval[string](t, ctx, `new URL(document.querySelector('[data-testid="count-sleeping"]').href).pathname + new URL(document.querySelector('[data-testid="count-sleeping"]').href).search`))
	rows := func(status string) map[string]string {
		within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status="+status), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
		return eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('tr[data-job-id]')].map(r => [r.dataset.jobId, r.dataset.status]))`)
	}
	require.Equal(t, map[string]string{napper: "sleeping"}, rows("sleeping"))
	require.Equal(t, "sleeping", eval[string](t, ctx, `document.querySelector('#f-status').value`))
	counts := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#status-counts a')].map(a => [a.dataset.status, a.querySelector('strong').textContent.trim()]))`)
	require.Equal(t, "1", counts["sleeping"])
	require.Equal(t, "1", counts["waiting"])
	require.Equal(t, "0", counts["queued"])
	require.Equal(t, map[string]string{waiter: "waiting"}, rows("waiting"))
	require.NotContains(t, rows("queued"), napper)
	shoot(t, ctx, "jobs-sleeping")
}
