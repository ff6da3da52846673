package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// queueRowJS reads one row of the Queues page.
const queueRowJS = `(name => {
	const r = document.querySelector('tr[data-queue="' + name + '"]');
	if (!r) return null;
	const t = id => r.querySelector('[data-testid="' + id + '"]').textContent.trim().replace(/\s+/g, ' ');
	return {state: t('queue-state'), queued: t('queue-queued'), running: t('queue-running'), limits: t('queue-limits')};
})`

type queueRowShape struct {
	State   string `json:"state"`
	Queued  string `json:"queued"`
	Running string `json:"running"`
	Limits  string `json:"limits"`
}

// htmxReady waits until htmx has processed the row's form and buttons: a
// live swap replaces the table, and a click in the moment before htmx has
// bound the new one would submit the form natively.
func htmxReady(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	waitJS(t, ctx, `(() => { const r = document.querySelector('tr[data-queue=`+jsString(name)+`]');
		return !!r && [...r.querySelectorAll('form, button')].every(e => e['htmx-internal-data']); })()`, 10*time.Second)
}

func queueRow(t *testing.T, ctx context.Context, name string) queueRowShape {
	t.Helper()
	return eval[queueRowShape](t, ctx, queueRowJS+`(`+jsString(name)+`)`)
}

// TestQueuesPageInABrowser pauses and resumes a queue, edits its limits
// (and is told what to fix when they are wrong), and watches its counts
// follow the jobs without a reload. FLINT_SCREENSHOTS=dir saves the page
// at 1400 and 375 px.
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestQueuesPageInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	sleeper := jobs.EnqueueParams{Type: jobs.TypeSleep, Queue: "reports.daily", Payload: json.RawMessage(`{"ms": 700}`)}
	_, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"})
	require.NoError(t, err)
	_, err = rig.store.Enqueue(bg, sleeper)
	require.NoError(t, err)

	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/queues"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="reports.daily"]`)))
	waitLive(t, ctx, 10*time.Second)
	require.Contains(t, queueRow(t, ctx, "reports.daily").State, "active")

	// A live refresh leaves the new buttons working at once: a click just
	// after a swap must not land on a button htmx has not bound yet.
	require.True(t, eval[bool](t, ctx, `(() => {
		window.__bound = [];
		document.body.addEventListener('htmx:afterSwap', () => queueMicrotask(() => window.__bound.push(
			[...document.querySelectorAll('#queues-live button[hx-post]')].every(b => b['htmx-internal-data']))));
		htmx.ajax('GET', '/queues', {source: '#queues-live', target: '#queues-live', swap: 'outerHTML'});
		return true })()`))
	waitJS(t, ctx, `window.__bound.length > 0`, 10*time.Second)
	require.NotContains(t, eval[[]bool](t, ctx, `window.__bound`), false, "buttons of a swapped table bound at once")

	htmxReady(t, ctx, "reports.daily")
	// Pause: the badge changes, and jobs enqueued now wait, counted live.
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-pause"]').click(); return true })()`))
	waitJS(t, ctx, `document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-state"]').textContent.includes('paused')`, 10*time.Second)
	require.True(t, rig.store.QueuePaused("reports.daily"))
	ps := make([]jobs.EnqueueParams, 6)
	for i := range ps {
		ps[i] = sleeper
	}
	_, err = rig.store.Enqueue(bg, ps...)
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-queued"]').textContent.trim() === '6'`, 15*time.Second)

	// Limits: one at once, 5 starts a second.
	htmxReady(t, ctx, "reports.daily")
	require.True(t, eval[bool](t, ctx, `(() => {
		const r = document.querySelector('tr[data-queue="reports.daily"]');
		r.querySelector('details').open = true;
		r.querySelector('input[name="concurrency"]').value = '1';
		r.querySelector('input[name="rate_limit"]').value = '5';
		r.querySelector('input[name="rate_period_seconds"]').value = '1';
		r.querySelector('[data-testid="queue-save"]').click();
		return true })()`))
	waitJS(t, ctx, `document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-limits"]').textContent.includes('1 at once')`, 10*time.Second)
	require.Equal(t, "1 at once · 5/s", queueRow(t, ctx, "reports.daily").Limits)
	shoot(t, ctx, "queues-paused-limited")

	// A wrong value: 422, the form stays open with what was typed and says
	// what to fix; nothing changes.
	htmxReady(t, ctx, "reports.daily")
	require.True(t, eval[bool](t, ctx, `(() => {
		const r = document.querySelector('tr[data-queue="reports.daily"]');
		r.querySelector('details').open = true;
		r.querySelector('input[name="rate_period_seconds"]').value = '';
		r.querySelector('[data-testid="queue-save"]').click();
		return true })()`))
	errSel := `tr[data-queue="reports.daily"] [data-testid="limit-error-rate_period_seconds"]`
	waitJS(t, ctx, `!!document.querySelector('`+errSel+`')`, 10*time.Second)
	require.Equal(t, "Required: the length of the period in seconds", eval[string](t, ctx, `document.querySelector('`+errSel+`').textContent.trim()`))
	require.Equal(t, "input", eval[string](t, ctx, `document.querySelector('`+errSel+`').previousElementSibling.tagName.toLowerCase()`),
		"the error is said under the field it is about")
	require.Equal(t, "true", eval[string](t, ctx, `document.querySelector('tr[data-queue="reports.daily"] input[name="rate_period_seconds"]').getAttribute('aria-invalid')`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('tr[data-queue="reports.daily"] details').open`))
	shoot(t, ctx, "queues-refused")
	q, err := rig.store.GetQueue(bg, "reports.daily")
	require.NoError(t, err)
	require.Equal(t, domain.RateLimit{Limit: 5, PeriodSeconds: 1}, *q.RateLimit)

	// The refused form is the operator's: news arriving live updates the
	// counts around it and leaves it with its error, and says nothing was
	// changed elsewhere (nothing was).
	_, err = rig.store.Enqueue(bg, sleeper)
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-queued"]').textContent.trim() === '7'`, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `!!document.querySelector('`+errSel+`')`), "a live refresh wiped the error")
	require.Equal(t, "", eval[string](t, ctx, `document.querySelector('tr[data-queue="reports.daily"] input[name="rate_period_seconds"]').value`))
	require.False(t, eval[bool](t, ctx, `!!document.querySelector('#queues-live [data-stale]')`), "a false \"Changed elsewhere\"")

	// An editor opened (nothing typed yet) stays open while the table
	// is swapped live under it.
	require.True(t, eval[bool](t, ctx, `(() => {
		const r = document.querySelector('tr[data-queue="mail"]');
		r.querySelector('details summary').click();
		window.__liveBefore = document.querySelector('#queues-live');
		return r.querySelector('details').open })()`))
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail", RunAt: ptrTo(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelector('#queues-live') !== window.__liveBefore`, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `document.querySelector('tr[data-queue="mail"] details').open`), "the open editor closed itself on a live swap")
	require.True(t, eval[bool](t, ctx, `(document.querySelector('tr[data-queue="mail"] summary').click(), true)`))

	// Resume: the jobs run one at a time, and the page follows them.
	htmxReady(t, ctx, "reports.daily")
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-resume"]').click(); return true })()`))
	waitJS(t, ctx, `document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-state"]').textContent.includes('active')`, 10*time.Second)
	waitJS(t, ctx, `document.querySelector('tr[data-queue="reports.daily"] [data-testid="queue-running"]').textContent.trim() === '1'`, 15*time.Second)
	seen := map[string]bool{}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		r := queueRow(t, ctx, "reports.daily")
		seen[r.Running] = true
		return r.Queued == "0" && r.Running == "0", fmt.Sprintf("the resumed queue to drain: %+v", r)
	})
	require.Equal(t, "0", queueRow(t, ctx, "reports.daily").Queued, "the resumed queue drained, followed live")
	require.NotContains(t, seen, "2", "the page never showed more running than the limit")
	shoot(t, ctx, "queues-drained")
}
