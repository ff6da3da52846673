package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestLostSessionSendsThePageToSignIn: Flint restarts with another
// session key (FLINT_SESSION_KEY unset), which ends every session. The
// open page's live stream comes back signed out; instead of a frozen
// "Disconnected" over stale numbers, the page goes to the sign-in page,
// and signing in brings the person back to the page they were on.
func TestLostSessionSendsThePageToSignIn(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 30*time.Second, chromedp.Navigate(rig.base+"/jobs?status=queued&type=noop"))
	waitLive(t, ctx, 15*time.Second)

	rig.restart(t, []byte("fedcba9876543210fedcba9876543210"))

	reachesSignIn(t, ctx)
	next := eval[string](t, ctx, `document.querySelector('input[name="next"]').value`)
	require.Equal(t, "/jobs?status=queued&type=noop", next)
	within(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#email"), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "browser-test-pw"),
		chromedp.Submit(chromedp.CSS("#password")),
	)
	waitFor(t, 30*time.Second, "the page the person was on", func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](`location.pathname + location.search === '/jobs?status=queued&type=noop'`))
		return err == nil && ok
	})
	waitLive(t, ctx, 15*time.Second)
}

// reachesSignIn waits for the tab to show the sign-in page (it navigates
// meanwhile: an evaluation cut short counts as not yet), and says where
// it is when it does not.
func reachesSignIn(t *testing.T, tab context.Context) {
	t.Helper()
	if pollUntil(30*time.Second, 100*time.Millisecond, func() bool {
		c, cancel := context.WithTimeout(tab, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](`location.pathname === '/login' && !!document.querySelector('[data-testid="login-form"]')`))
		return err == nil && ok
	}) {
		return
	}
	c, cancel := context.WithTimeout(tab, 5*time.Second)
	defer cancel()
	where, err := chromedp.Run(c, chromedp.Evaluate[string](`location.href + ' ' + document.title`))
	t.Fatalf("the page did not reach the sign-in page: %s %v", where, err)
}
