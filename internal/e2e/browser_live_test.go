package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// tableStructure is JavaScript that describes #jobs-table as the operator
// sees it: what it holds and where its rows are.
const tableStructure = `(() => {
  const t = document.querySelector('#jobs-table');
  if (!t) return {present: false};
  const rows = [...document.querySelectorAll('tr[data-job-id]')];
  return {
    present: true,
    inMain: t.parentElement && t.parentElement.id === 'main',
    bulkbar: !!t.querySelector('form[data-bulk] > .bulkbar'),
    headers: t.querySelectorAll('table > thead > tr > th').length,
    pager: !!t.querySelector(':scope > .pager'), // beside the bulk form, so its links carry no form values
    rows: rows.length,
    rowsInBody: rows.filter(r => r.parentElement.tagName === 'TBODY' && r.closest('#jobs-table') === t).length,
    strayRows: document.querySelectorAll('main > tr, main > tbody, body > tr').length,
    statuses: rows.map(r => r.dataset.status),
    checked: [...t.querySelectorAll('input[name=ids]:checked')].map(b => b.value),
    selectedCount: (t.querySelector('[data-selected-count]') || {}).textContent,
    live: document.querySelector('[data-live]').dataset.state,
  };
})()`

type tableShape struct {
	Present       bool     `json:"present"`
	InMain        bool     `json:"inMain"`
	Bulkbar       bool     `json:"bulkbar"`
	Headers       int      `json:"headers"`
	Pager         bool     `json:"pager"`
	Rows          int      `json:"rows"`
	RowsInBody    int      `json:"rowsInBody"`
	StrayRows     int      `json:"strayRows"`
	Statuses      []string `json:"statuses"`
	Checked       []string `json:"checked"`
	SelectedCount string   `json:"selectedCount"`
	Live          string   `json:"live"`
}

func shapeOf(t *testing.T, ctx context.Context) tableShape {
	t.Helper()
	return eval[tableShape](t, ctx, tableStructure)
}

// TestLiveJobsTableKeepsItsShape watches the jobs list while each of its
// fifty rows changes state three times and a thousand other jobs run past
// it: the table keeps its bulk bar, header and pager, every row stays in
// its body, the selection and the scroll position survive, and the
// indicator stays live. (The first dashboard swapped a row in place of the
// whole table on its first update.)
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestLiveJobsTableKeepsItsShape(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()

	// Fifty jobs wait for a gate that opens once the page is watching: a
	// job scheduled for later, retried (run now) when the test says.
	later := time.Now().Add(time.Hour)
	gate, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", RunAt: &later})
	require.NoError(t, err)
	params := make([]jobs.EnqueueParams, 50)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "sleep", Payload: json.RawMessage(`{"ms": 40}`), DependsOn: []uuid.UUID{gate[0].Job.ID}}
	}
	waiting, err := rig.store.Enqueue(bg, params...)
	require.NoError(t, err)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitLive(t, ctx, 10*time.Second)
	before := shapeOf(t, ctx)
	require.Equal(t, 50, before.Rows)
	require.Equal(t, 11, before.Headers)
	for _, st := range before.Statuses {
		require.Equal(t, "blocked", st)
	}
	// Select two rows and scroll down, as an operator about to act would.
	picked := []string{waiting[3].Job.ID.String(), waiting[40].Job.ID.String()}
	within(t, ctx, 10*time.Second,
		chromedp.Click(chromedp.CSS("#sel-"+picked[0])),
		chromedp.Click(chromedp.CSS("#sel-"+picked[1])))
	scrollY := eval[int](t, ctx, `window.scrollTo(0, 400); window.__noReload = true; window.__swaps = 0; window.__swapped = {};
		new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(n => {
			if (n.dataset && n.dataset.jobId) { window.__swaps++; window.__swapped[n.dataset.jobId] = true; }
		}))).observe(document.querySelector('#jobs-table tbody'), {childList: true}); window.scrollY`)
	require.Equal(t, 400, scrollY)

	// Open the gate. A thousand jobs that are not on the page run
	// meanwhile, in bursts larger than one update lists.
	_, err = rig.store.RetryJob(bg, gate[0].Job.ID)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 5; i++ {
			burst := make([]jobs.EnqueueParams, 200)
			for j := range burst {
				burst[j] = jobs.EnqueueParams{Type: "noop", Queue: "background"}
			}
			if _, err := rig.store.Enqueue(bg, burst...); err != nil {
				done <- err
				return
			}
			time.Sleep(300 * time.Millisecond) // the scenario: bursts a moment apart
		}
		done <- nil
	}()
	for _, j := range waiting {
		waitStatus(t, rig.store, j.Job.ID, jobs.StateCompleted)
	}
	require.NoError(t, <-done)

	waitJS(t, ctx, `[...document.querySelectorAll('tr[data-job-id]')].every(r => r.dataset.status === 'completed')`, 15*time.Second)
	after := shapeOf(t, ctx)
	require.True(t, after.Present && after.InMain, "the table is where it was")
	require.True(t, after.Bulkbar, "the bulk bar is still there")
	require.True(t, after.Pager, "the pager is still there")
	require.Equal(t, 11, after.Headers, "the header row is still there")
	require.Equal(t, 50, after.Rows)
	require.Equal(t, 50, after.RowsInBody, "every row sits in the table's body")
	require.Zero(t, after.StrayRows)
	require.ElementsMatch(t, picked, after.Checked, "the selection survived")
	require.Equal(t, "2", after.SelectedCount)
	require.Equal(t, "open", after.Live)
	require.Equal(t, 400, eval[int](t, ctx, `window.scrollY`), "the page did not jump")
	require.True(t, eval[bool](t, ctx, `window.__noReload === true`), "the page was not reloaded")
	// Every row was swapped in place as its job moved (a row whose job
	// moved twice within one update window is swapped once).
	swaps := eval[int](t, ctx, `window.__swaps`)
	require.Equal(t, 50, eval[int](t, ctx, `Object.keys(window.__swapped).length`), "every row was swapped as its job changed")
	require.GreaterOrEqual(t, swaps, 50)
	// The thousand newer jobs belong on this unfiltered first page.
	require.True(t, eval[bool](t, ctx, `document.querySelector('[data-new-banner]').classList.contains('show')`))
	t.Logf("%d row swaps", swaps)
}

// TestLiveNewJobsBanner: on a filtered first page, jobs that match the
// filter raise "New jobs arrived"; others do not; "Show them" loads them.
func TestLiveNewJobsBanner(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	later := time.Now().Add(time.Hour)
	_, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", Queue: "banner", RunAt: &later})
	require.NoError(t, err)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?type=noop&queue=banner"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.Equal(t, 1, shapeOf(t, ctx).Rows)
	banner := `document.querySelector('[data-new-banner]').classList.contains('show')`

	// Jobs of another type or queue do not belong here.
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "sleep", Queue: "banner", RunAt: &later},
		jobs.EnqueueParams{Type: "noop", Queue: "elsewhere", RunAt: &later})
	require.NoError(t, err)
	// Nothing on the page marks an update that changes nothing on it, so
	// give the stream's update (four a second at most) a generous while.
	time.Sleep(1500 * time.Millisecond)
	require.False(t, eval[bool](t, ctx, banner), "no banner for jobs the filter leaves out")

	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", Queue: "banner", RunAt: &later})
	require.NoError(t, err)
	waitJS(t, ctx, banner, 10*time.Second)
	require.Equal(t, 1, shapeOf(t, ctx).Rows, "the page does not move under the operator")

	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(`[data-new-banner] a`)))
	waitJS(t, ctx, fmt.Sprintf(`!!document.querySelector('tr[data-job-id="%s"]')`, res[0].Job.ID), 10*time.Second)
	after := shapeOf(t, ctx)
	require.Equal(t, 2, after.Rows)
	require.Equal(t, 2, after.RowsInBody)
	require.True(t, after.Bulkbar && after.Pager && after.InMain)
	require.False(t, eval[bool](t, ctx, banner), "the banner goes once they are shown")
	require.Equal(t, "open", after.Live)
}

// textReport describes every SVG text of the page's charts and graphs as
// drawn: its size in CSS pixels, whether it leaves its card, and whether
// two labels of one chart overlap.
const textReport = `(() => {
  const out = {minPx: 1e9, count: 0, clipped: [], overlaps: []};
  document.querySelectorAll('svg').forEach(svg => {
    const card = svg.closest('.card');
    if (!card || !svg.querySelector('text')) return;
    const box = card.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() !== '');
    const rects = texts.map(t => t.getBoundingClientRect());
    texts.forEach((t, i) => {
      const px = parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a;
      out.minPx = Math.min(out.minPx, px);
      out.count++;
      const r = rects[i];
      if (!t.closest('.graph') && (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)) out.clipped.push(t.textContent);
      for (let j = 0; j < i; j++) {
        const q = rects[j];
        if (r.left < q.right - 1 && q.left < r.right - 1 && r.top < q.bottom - 1 && q.top < r.bottom - 1) out.overlaps.push(t.textContent + ' / ' + texts[j].textContent);
      }
    });
  });
  return out;
})()`

type textShape struct {
	MinPx    float64  `json:"minPx"`
	Count    int      `json:"count"`
	Clipped  []string `json:"clipped"`
	Overlaps []string `json:"overlaps"`
}

// TestChartsReadable: the overview chart and a twenty-node dependency
// graph have labels of at least 11 px, none cut off or drawn over another,
// on a desktop and on a phone.
func TestChartsReadable(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	done := make([]jobs.EnqueueParams, 30)
	for i := range done {
		done[i] = jobs.EnqueueParams{Type: "noop"}
	}
	res, err := rig.store.Enqueue(bg, done...)
	require.NoError(t, err)
	waitStatus(t, rig.store, res[29].Job.ID, jobs.StateCompleted)
	later := time.Now().Add(time.Hour)
	hub, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", RunAt: &later})
	require.NoError(t, err)
	fan := make([]jobs.EnqueueParams, 19)
	for i := range fan {
		fan[i] = jobs.EnqueueParams{Type: fmt.Sprintf("report.step-%02d", i), DependsOn: []uuid.UUID{hub[0].Job.ID}}
	}
	_, err = rig.store.Enqueue(bg, fan...) // they wait for the hub, which waits an hour
	require.NoError(t, err)

	for _, width := range []int64{1400, 375} {
		for _, path := range []string{"/", "/jobs/" + hub[0].Job.ID.String()} {
			within(t, ctx, 20*time.Second, chromedp.EmulateViewport(width, 900), chromedp.Navigate(rig.base+path), chromedp.WaitVisible(chromedp.CSS("svg text")))
			waitLive(t, ctx, 10*time.Second)
			r := eval[textShape](t, ctx, textReport)
			require.Positive(t, r.Count, "%s at %d px", path, width)
			require.GreaterOrEqual(t, r.MinPx, 11.0, "%s at %d px", path, width)
			require.Empty(t, r.Clipped, "%s at %d px", path, width)
			require.Empty(t, r.Overlaps, "%s at %d px", path, width)
			require.LessOrEqual(t, eval[int](t, ctx, `document.documentElement.scrollWidth`), int(width), "%s at %d px: the page does not scroll sideways", path, width)
		}
	}
}
