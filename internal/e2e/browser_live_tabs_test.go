package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// livePages are the dashboard pages that update live.
var livePages = []string{"/", "/jobs", "/dlq", "/bin", "/recurring", "/workers", "/settings", "/audit", "/logs"}

// TestLiveEightTabsShareOneStream opens eight dashboard tabs at once: all
// load, all go live, one stream serves them (one tab leads), an update
// reaches each, and when the leading tab closes another takes over.
func TestLiveEightTabsShareOneStream(t *testing.T) {
	t.Parallel()
	testTabsShareOneStream(t, false)
}

// TestLiveTabsShareOneStreamWithoutWebLocks is the same where the browser
// has no Web Locks (plain HTTP on an address other than localhost): the
// tabs elect a leader over BroadcastChannel.
func TestLiveTabsShareOneStreamWithoutWebLocks(t *testing.T) {
	t.Parallel()
	testTabsShareOneStream(t, true)
}

func testTabsShareOneStream(t *testing.T, noLocks bool) {
	rig := startDashboard(t)
	root := browser(t)
	signIn(t, root, rig.base)
	within(t, root, 10*time.Second, chromedp.Navigate("about:blank"))
	require.Eventually(t, func() bool { return rig.broker.Subscribers() == 0 }, 20*time.Second, 100*time.Millisecond,
		"the sign-in page's stream ends when it is left")

	tabs := make([]context.Context, 8)
	cancels := make([]context.CancelFunc, 8)
	for i := range tabs {
		tabs[i], cancels[i] = chromedp.NewContext(root)
		defer cancels[i]()
		require.NoError(t, chromedp.Do(tabs[i])) // open every tab before any loads (a tab opened by its first navigation stops answering here)
		if noLocks {
			_, err := chromedp.Call(tabs[i], page.AddScriptToEvaluateOnNewDocument,
				page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete Navigator.prototype.locks`})
			require.NoError(t, err)
		}
	}
	for i, tab := range tabs {
		start := time.Now()
		within(t, tab, 10*time.Second, chromedp.Navigate(rig.base+livePages[i%len(livePages)]), chromedp.WaitVisible(chromedp.CSS("main")))
		require.Less(t, time.Since(start), 5*time.Second, "tab %d loads", i)
	}
	if noLocks {
		require.False(t, eval[bool](t, tabs[0], `!!navigator.locks`))
	}
	for _, tab := range tabs {
		waitLive(t, tab, 10*time.Second)
	}
	leaders := func() (n, at int) {
		at = -1
		for i, tab := range tabs {
			if tab == nil {
				continue
			}
			if eval[string](t, tab, `window.flintLive.role()`) == "leader" {
				n++
				at = i
			}
		}
		return n, at
	}
	n, leader := leaders()
	require.Equal(t, 1, n, "exactly one tab holds the stream")
	require.Eventually(t, func() bool { return rig.broker.Subscribers() == 1 }, 20*time.Second, 100*time.Millisecond,
		"the server sees one stream for eight tabs")

	// An update reaches every tab: a new job shows on the overview's counts
	// and as a banner on the jobs list.
	later := time.Now().Add(time.Hour)
	_, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "noop", RunAt: &later})
	require.NoError(t, err)
	require.Equal(t, "0", eval[string](t, tabs[0], `document.querySelector('[data-testid="count-scheduled"] .stat-value').textContent.trim()`))
	waitJS(t, tabs[0], `document.querySelector('[data-testid="count-scheduled"] .stat-value').textContent.trim() === '1'`, 10*time.Second)
	waitJS(t, tabs[1], `document.querySelector('[data-new-banner]').classList.contains('show')`, 10*time.Second)

	// The leading tab closes: another takes over, and the tabs stay live.
	cancels[leader]()
	tabs[leader] = nil
	require.Eventually(t, func() bool { n, _ := leaders(); return n == 1 }, 15*time.Second, 200*time.Millisecond,
		"another tab takes the stream over")
	for _, tab := range tabs {
		if tab != nil {
			waitLive(t, tab, 10*time.Second)
		}
	}
	_, err = rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "noop", Queue: "after-handover", RunAt: &later})
	require.NoError(t, err)
	if leader != 1 {
		waitJS(t, tabs[1], `document.querySelectorAll('[data-new-banner].show').length === 1`, 10*time.Second)
	}
	require.Eventually(t, func() bool { return rig.broker.Subscribers() == 1 }, 30*time.Second, 200*time.Millisecond,
		"the closed tab's stream is gone; the new leader's is the only one")
}

// TestLiveTwentyNavigations moves through the dashboard twenty times in
// one tab: each page loads and goes live (the first dashboard hung on the
// eighth for good, its earlier pages' streams holding all six of the
// browser's connections to the host, which the bound of within catches).
// How fast a page loads is the benchmarks' business: a bound of two
// seconds here failed on a machine busy with other tests.
func TestLiveTwentyNavigations(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	for i := 0; i < 20; i++ {
		path := livePages[i%len(livePages)]
		start := time.Now()
		within(t, ctx, 10*time.Second, chromedp.Navigate(rig.base+path), chromedp.WaitVisible(chromedp.CSS("main")))
		loaded := time.Since(start)
		waitLive(t, ctx, 5*time.Second)
		t.Logf("navigation %d to %s: loaded in %s, live in %s", i+1, path, loaded.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	// Back and forward come from the server again, never from a cache
	// that keeps a stream open.
	within(t, ctx, 10*time.Second, chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS("main")))
	waitLive(t, ctx, 5*time.Second)
	require.Eventually(t, func() bool { return rig.broker.Subscribers() <= 2 }, 20*time.Second, 100*time.Millisecond)
}

// TestLivePagesWithoutJobRows: the audit trail, recurring series and
// settings pages follow changes made elsewhere; a settings form being
// edited is not replaced under the operator's hands.
func TestLivePagesWithoutJobRows(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	root := browser(t)
	signIn(t, root, rig.base)
	bg := context.Background()
	open := func(path string) context.Context {
		tab, cancel := chromedp.NewContext(root)
		t.Cleanup(cancel)
		require.NoError(t, chromedp.Do(tab))
		within(t, tab, 20*time.Second, chromedp.Navigate(rig.base+path), chromedp.WaitVisible(chromedp.CSS("main")))
		waitLive(t, tab, 10*time.Second)
		return tab
	}
	audit, recurring, settings, editing := open("/audit"), open("/recurring"), open("/settings"), open("/settings")

	require.NoError(t, rig.store.RecordAudit(bg, domain.AuditEntry{Actor: "deploy-bot", Source: "api", Action: "purge"}))
	waitJS(t, audit, `[...document.querySelectorAll('[data-testid="audit-row"]')].some(r => r.textContent.includes('deploy-bot'))`, 10*time.Second)

	_, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", Queue: "nightly", IntervalSeconds: 3600})
	require.NoError(t, err)
	waitJS(t, recurring, `document.querySelectorAll('[data-testid="series-row"]').length === 1`, 10*time.Second)

	// One operator is halfway through editing; another changes a setting.
	eval[bool](t, editing, `const f = document.querySelector('#f-alert_cooldown_seconds'); f.value = '1234';
		f.dispatchEvent(new Event('input', {bubbles: true})); true`)
	_, _, err = rig.store.UpdateSettings(bg, map[string]json.RawMessage{"dlq_threshold": json.RawMessage("42")}, "someone-else")
	require.NoError(t, err)
	waitJS(t, settings, `document.querySelector('#f-dlq_threshold').value === '42'`, 10*time.Second)
	waitJS(t, editing, `!!document.querySelector('#settings [data-stale]')`, 10*time.Second)
	require.Equal(t, "1234", eval[string](t, editing, `document.querySelector('#f-alert_cooldown_seconds').value`), "the edit in progress is kept")
	require.NotEqual(t, "42", eval[string](t, editing, `document.querySelector('#f-dlq_threshold').value`))
	// Asked to, the form loads the current values.
	within(t, editing, 10*time.Second, chromedp.Click(chromedp.CSS(`#settings [data-stale] button`)))
	waitJS(t, editing, `document.querySelector('#f-dlq_threshold').value === '42' && !document.querySelector('[data-stale]')`, 10*time.Second)
	for _, tab := range []context.Context{audit, recurring, settings, editing} {
		require.Equal(t, "open", eval[string](t, tab, `document.querySelector('[data-live]').dataset.state`))
	}
}
