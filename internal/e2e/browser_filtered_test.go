package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestFilteredListKeepsMatchingItsFilter watches /jobs?status=running
// through a burst: jobs that start come onto it without a click, jobs that
// finish leave it, and at no moment does it show a job in another state;
// its relative times tick while it is open.
func TestFilteredListKeepsMatchingItsFilter(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=running"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.Zero(t, shapeOf(t, ctx).Rows)

	var ids []string
	for range 3 {
		res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms": 8000}`)})
		require.NoError(t, err)
		ids = append(ids, res[0].Job.ID.String())
	}
	// They start, and come onto the list by themselves.
	waitUntil(t, 20*time.Second, func() (bool, string) {
		s := shapeOf(t, ctx)
		for _, st := range s.Statuses {
			require.Equal(t, "running", st, "a running-jobs list showed a %s job", st)
		}
		if s.Rows == 3 {
			require.Equal(t, s.Rows, s.RowsInBody)
			require.Zero(t, s.StrayRows)
		}
		return s.Rows == 3, fmt.Sprintf("the started jobs to come onto the list: %+v", s)
	})
	require.False(t, eval[bool](t, ctx, `document.querySelector('[data-new-banner]').classList.contains('show')`),
		"the jobs came onto the list, so nothing is hidden behind the banner")
	require.ElementsMatch(t, ids, eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`))

	// Times tick: the "running for" of a row grows while the page is open.
	// (Long enough jobs that they still run meanwhile on a busy machine;
	// a row being swapped reads as not yet.)
	took := `(document.querySelector('tr[data-job-id] [data-testid="job-took"] time') || {}).textContent`
	first := eval[string](t, ctx, took)
	require.NotEmpty(t, first)
	waitJS(t, ctx, `(t => t !== undefined && t !== `+jsString(first)+`)(`+took+`)`, 5*time.Second)

	// They finish and leave; the list never shows them completed.
	waitUntil(t, 30*time.Second, func() (bool, string) {
		s := shapeOf(t, ctx)
		for _, st := range s.Statuses {
			require.Equal(t, "running", st, "a running-jobs list showed a %s job", st)
		}
		return s.Rows == 0 && count(t, ctx, `tr.leaving`) == 0, fmt.Sprintf("the finished jobs to leave the list: %+v", s)
	})
	shoot(t, ctx, "jobs-running-drained")
}

// TestShowThemKeepsTheSelection: on a list the browser cannot check new
// jobs against (a search), new jobs wait behind "New jobs arrived"; "Show
// them" loads them and keeps the rows the operator had selected.
func TestShowThemKeepsTheSelection(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms": 1}`),
		RunAt: ptrTo(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	picked := res[0].Job.ID.String()
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?q=slee"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id="`+picked+`"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `(() => { const b = document.querySelector('input[name=ids][value="`+picked+`"]');
		b.checked = true; b.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`))
	require.Equal(t, "1", shapeOf(t, ctx).SelectedCount)

	res, err = rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms": 1}`),
		RunAt: ptrTo(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	added := res[0].Job.ID.String()
	waitJS(t, ctx, `document.querySelector('[data-new-banner]').classList.contains('show')`, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('[data-new-banner] a').click(); return true; })()`))
	waitJS(t, ctx, `!!document.querySelector('tr[data-job-id="`+added+`"]')`, 10*time.Second)
	s := shapeOf(t, ctx)
	require.Equal(t, 2, s.Rows)
	require.Equal(t, []string{picked}, s.Checked, "the selection survived loading the new jobs")
	require.Equal(t, "1", s.SelectedCount)
}

func ptrTo[T any](v T) *T { return &v }
