package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

const (
	bannerShown = `document.querySelector('[data-testid="db-banner"]') !== null`
	bannerGone  = `document.querySelector('[data-testid="db-banner"]') === null`
	// pickStatus changes the jobs list's status filter, which HTMX sends.
	pickStatus = `(() => { const s = document.querySelector('#f-status'); s.selectedIndex = (s.selectedIndex + 1) %% s.options.length;
		s.dispatchEvent(new Event('change', {bubbles: true})); return %s; })()`
)

// TestDashboardWhileDatabaseAway cuts the database off under a signed-in
// browser (a proxy in front of the real server resets every connection)
// and brings it back: an HTMX request made meanwhile puts a banner over
// the page, the next good answer takes it away; a page opened meanwhile is
// the banner page, which reloads itself into the real page once the
// database is back; nobody is signed out.
func TestDashboardWhileDatabaseAway(t *testing.T) {
	t.Parallel()
	proxy, u := dbtest.NewProxy(t, dbtest.NewDatabase(t))
	store, err := db.Open(context.Background(), db.Config{URL: u})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	rig := startDashboardOn(t, store, u)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second,
		chromedp.Navigate(rig.base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="filters"]`)),
	)

	proxy.Down()
	eval[bool](t, ctx, fmt.Sprintf(pickStatus, "true"))
	waitJS(t, ctx, bannerShown, 15*time.Second)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="db-banner"]').textContent`), "database is unreachable")

	proxy.Up()
	waitJS(t, ctx, fmt.Sprintf(pickStatus, bannerGone), 20*time.Second)

	proxy.Down()
	within(t, ctx, 20*time.Second,
		chromedp.Navigate(rig.base+"/workers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="db-banner"]`)),
	)
	require.Contains(t, eval[string](t, ctx, `document.title`), "Database unreachable")
	proxy.Up()
	// The page reloads itself every few seconds; once the database answers
	// it is the workers page, signed in as before.
	waitJS(t, ctx, bannerGone+` && location.pathname === '/workers' && document.querySelector('[data-testid="account-link"]') !== null`, 30*time.Second)
}
