package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestFilteredListFillsDuringBursts watches /jobs?status=running&type=sleep
// while bursts of other jobs, each larger than one live update lists, pass
// by: the running sleep jobs come onto the page by themselves (not behind
// "New jobs arrived"), a selected one that finishes is said to have left,
// and once none runs the page says so.
func TestFilteredListFillsDuringBursts(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=running&type=sleep"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitLive(t, ctx, 10*time.Second)
	empty := `(document.querySelector('#jobs-table [data-testid="empty"]') || {}).textContent`
	require.Equal(t, "No running jobs match this filter.", eval[string](t, ctx, empty))

	// Bursts of 300 low-priority noop jobs every 150 ms: every update
	// overflows.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		low := 3
		for {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			ps := make([]jobs.EnqueueParams, 300)
			for i := range ps {
				ps[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "flood", Priority: low}
			}
			if _, err := rig.store.Enqueue(bg, ps...); err != nil {
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	var ids []string
	for range 3 {
		res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeSleep, Priority: 1, Payload: []byte(`{"ms": 4000}`)})
		require.NoError(t, err)
		ids = append(ids, res[0].Job.ID.String())
	}
	waitUntil(t, 20*time.Second, func() (bool, string) {
		s := shapeOf(t, ctx)
		for _, st := range s.Statuses {
			require.Equal(t, "running", st, "a running-jobs list showed a %s job", st)
		}
		return s.Rows == 3, fmt.Sprintf("the running sleep jobs to come onto the list during the bursts: %+v", s)
	})
	s := shapeOf(t, ctx)
	require.Equal(t, s.Rows, s.RowsInBody)
	require.True(t, s.Bulkbar && s.Pager)
	require.ElementsMatch(t, ids, eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`))
	require.False(t, eval[bool](t, ctx, `document.querySelector('[data-new-banner]').classList.contains('show')`),
		"the jobs came onto the list, so nothing waits behind the banner")
	require.Zero(t, count(t, ctx, `#jobs-table [data-testid="empty"]`))
	// The actions on all of them follow the count.
	waitJS(t, ctx, `(document.querySelector('[data-testid="cancel-all"]') || {}).textContent === 'Cancel all 3'`, 10*time.Second)
	shoot(t, ctx, "jobs-running-burst")

	// Select one; when it finishes it leaves, and the page says so.
	require.True(t, eval[bool](t, ctx, `(() => { const b = document.querySelector('input[name=ids][value="`+ids[0]+`"]');
		b.checked = true; b.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`))
	require.Equal(t, "1", shapeOf(t, ctx).SelectedCount)
	waitUntil(t, 30*time.Second, func() (bool, string) {
		s := shapeOf(t, ctx)
		return s.Rows == 0, fmt.Sprintf("the finished jobs to leave the list: %+v", s)
	})
	waitJS(t, ctx, `!!document.querySelector('[data-testid="left-notice"]')`, 10*time.Second)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="left-notice"]').textContent`), "1 selected job left this page")
	require.Equal(t, "0", shapeOf(t, ctx).SelectedCount)
	waitJS(t, ctx, empty+` === 'No running jobs match this filter.'`, 15*time.Second)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="left-notice"]').textContent`), "1 selected job left this page",
		"the notice outlives the page being read again")
	shoot(t, ctx, "jobs-running-left")
}

// TestShowThemSaysWhichSelectedJobsLeft: "Show them" loads the page again;
// a selected job that is no longer on it is said to have left, not
// dropped from the selection in silence.
func TestShowThemSaysWhichSelectedJobsLeft(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	later := time.Now().Add(time.Hour)
	var ids []string
	for range 2 {
		res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms": 1}`), RunAt: &later})
		require.NoError(t, err)
		ids = append(ids, res[0].Job.ID.String())
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?q=slee"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id="`+ids[0]+`"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `(() => { for (const id of `+fmt.Sprintf("[%q, %q]", ids[0], ids[1])+`) {
		const b = document.querySelector('input[name=ids][value="' + id + '"]');
		b.checked = true; b.dispatchEvent(new Event('change', {bubbles: true})); } return true; })()`))
	require.Equal(t, "2", shapeOf(t, ctx).SelectedCount)

	// One of them is deleted elsewhere; a new job arrives.
	_, err := rig.store.DeleteJob(bg, uuid.MustParse(ids[0]))
	require.NoError(t, err)
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms": 1}`), RunAt: &later})
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelector('[data-new-banner]').classList.contains('show')`, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('[data-new-banner] a').click(); return true; })()`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="left-notice"]')`, 10*time.Second)
	s := shapeOf(t, ctx)
	require.Equal(t, 2, s.Rows)
	require.Equal(t, []string{ids[1]}, s.Checked, "the one still on the page stays selected")
	require.Equal(t, "1", s.SelectedCount)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="left-notice"]').textContent`), "1 selected job left this page")
}
