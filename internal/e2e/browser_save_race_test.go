package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestSaveAnswerWinsOverALiveRefresh holds, in the browser, a live
// refresh of the Queues table and then a limits save that the operator
// got wrong, and lets the refresh be answered first. The refresh, asked
// for before the save, must not take the save's place: once answered,
// the save's 422 is on the page under its field (it used to land on the
// table the refresh had just replaced, and the operator never saw it),
// and a refresh after the save leaves it there.
func TestSaveAnswerWinsOverALiveRefresh(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	_, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail", RunAt: ptrTo(time.Now().Add(time.Hour))})
	require.NoError(t, err)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/queues"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="mail"]`)))
	waitLive(t, ctx, 10*time.Second)
	htmxReady(t, ctx, "mail")
	// __gets counts the answered GETs asked for from the refresh below on,
	// not one still in flight from the page's start, which would let the
	// test release the save before the refresh it holds was answered.
	require.True(t, eval[bool](t, ctx, `(() => { window.__gets = 0; window.__track = false;
		document.addEventListener('htmx:beforeRequest', e => { if (window.__track && e.detail.requestConfig.verb === 'get') e.detail.xhr.__tracked = true; });
		document.addEventListener('htmx:afterRequest', e => { if (e.detail.xhr && e.detail.xhr.__tracked) window.__gets++; });
		return true })()`))

	next, releaseRest := holdRequests(t, ctx, rig.base, "*/queues", "*/queues/mail/limits")
	release := func(ev fetch.EventRequestPaused) {
		_, err := chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		require.NoError(t, err)
	}

	require.True(t, eval[bool](t, ctx, `(window.__track = true, flint.apply({topics: ['stats']}), true)`))
	refresh := next("GET", "/queues")
	require.True(t, eval[bool](t, ctx, `(() => {
		const r = document.querySelector('tr[data-queue="mail"]');
		r.querySelector('details').open = true;
		r.querySelector('input[name="rate_limit"]').value = '5';
		r.querySelector('input[name="rate_period_seconds"]').value = '';
		r.querySelector('[data-testid="queue-save"]').click();
		return true })()`))
	save := next("POST", "/queues/mail/limits")

	release(refresh)
	waitJS(t, ctx, `window.__gets > 0`, 10*time.Second)
	releaseRest()
	release(save)

	errSel, _ := json.Marshal(`tr[data-queue="mail"] [data-testid="limit-error-rate_period_seconds"]`)
	waitJS(t, ctx, `!!document.querySelector(`+string(errSel)+`)`, 10*time.Second)
	require.Equal(t, "Required: the length of the period in seconds", eval[string](t, ctx, `document.querySelector(`+string(errSel)+`).textContent.trim()`))
	// The refresh that follows the save keeps the refused form as typed.
	waitJS(t, ctx, `window.__gets > 1`, 10*time.Second)
	require.True(t, eval[bool](t, ctx, `!!document.querySelector(`+string(errSel)+`)`), "the refresh after the save wiped its error")
	require.Equal(t, "5", eval[string](t, ctx, `document.querySelector('tr[data-queue="mail"] input[name="rate_limit"]').value`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('tr[data-queue="mail"] details').open`))
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('#queues-live').length`))
	q, err := rig.store.GetQueue(context.Background(), "mail")
	require.NoError(t, err)
	require.Nil(t, q.RateLimit, "a refused save changes nothing")
}

// holdRequests has the browser hold every request whose URL matches one
// of patterns until the test releases it: next returns the next one held
// (its method and path, after base, checked), and after releaseRest the
// requests held from then on go through at once.
func holdRequests(t *testing.T, ctx context.Context, base string, patterns ...string) (next func(method, path string) fetch.EventRequestPaused, releaseRest func()) {
	t.Helper()
	paused := make(chan fetch.EventRequestPaused)
	released := make(chan struct{})
	evCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() {
		for ev, err := range chromedp.Events(evCtx, fetch.RequestPaused) {
			if err != nil {
				return
			}
			select {
			case paused <- ev:
			case <-released:
				_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			case <-evCtx.Done():
				return
			}
		}
	}()
	var ps []*fetch.RequestPattern
	for _, p := range patterns {
		ps = append(ps, &fetch.RequestPattern{URLPattern: p})
	}
	_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: ps})
	require.NoError(t, err)
	next = func(method, path string) fetch.EventRequestPaused {
		t.Helper()
		select {
		case ev := <-paused:
			require.Equal(t, method, ev.Request.Method, ev.Request.URL)
			require.Equal(t, base+path, ev.Request.URL)
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("the browser sent no %s %s", method, path)
		}
		panic("unreachable")
	}
	return next, func() { close(released) }
}
