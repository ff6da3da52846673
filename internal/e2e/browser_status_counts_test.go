package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestJobsListCountsPerState: the Jobs list says how many jobs each state
// holds within its queue filter, each count a link to that state's list,
// and the counts move live.
func TestJobsListCountsPerState(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	zero := 0
	later := time.Now().Add(time.Hour)
	var last *jobs.Job
	for _, p := range []jobs.EnqueueParams{
		{Type: jobs.TypeNoop, Queue: "mail"}, {Type: jobs.TypeNoop, Queue: "mail"},
		{Type: "fail", Queue: "mail", MaxRetries: &zero, Payload: json.RawMessage(`{"message": "bounced"}`)},
		{Type: jobs.TypeNoop, Queue: "mail", RunAt: &later},
		{Type: jobs.TypeNoop, Queue: "other"},
	} {
		res, err := rig.store.Enqueue(bg, p)
		require.NoError(t, err)
		last = res[0].Job
		if p.RunAt == nil {
			want := jobs.StateCompleted
			if p.Type == "fail" {
				want = jobs.StateDeadLetter
			}
			waitStatus(t, rig.store, last.ID, want)
		}
	}
	counts := `Object.fromEntries([...document.querySelectorAll('[data-testid="status-counts"] a')].map(a => [a.dataset.status, a.querySelector('[data-testid="status-count"]').textContent.trim()]))`

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?queue=mail"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="status-counts"]`)))
	waitLive(t, ctx, 15*time.Second)
	got := eval[map[string]string](t, ctx, counts)
	require.Equal(t, "2", got["completed"])
	require.Equal(t, "1", got["dead_letter"])
	require.Equal(t, "1", got["scheduled"])
	require.Equal(t, "0", got["running"])
	require.Equal(t, "/jobs?queue=mail&status=dead_letter", eval[string](t, ctx, `document.querySelector('[data-testid="status-counts"] a[data-status="dead_letter"]').getAttribute('href')`))
	shoot(t, ctx, "jobs-status-counts")

	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"})
	require.NoError(t, err)
	waitStatus(t, rig.store, res[0].Job.ID, jobs.StateCompleted)
	waitJS(t, ctx, `(`+counts+`).completed === '3'`, 20*time.Second)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="status-counts"]`)))
	got = eval[map[string]string](t, ctx, counts)
	require.Equal(t, "4", got["completed"], "every queue's")
	require.Equal(t, "0", got["retrying"])
}
