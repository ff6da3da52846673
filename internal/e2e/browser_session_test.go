package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestLostSessionSendsEveryTabToSignIn: Flint restarts with another
// session key (FLINT_SESSION_KEY unset), which ends every session. The
// open tabs' live stream comes back signed out; instead of a frozen
// "Disconnected" over stale numbers, the tabs go to the sign-in page, and
// signing in brings the person back to the page they were on.
func TestLostSessionSendsEveryTabToSignIn(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	root := browser(t)
	signIn(t, root, rig.base)
	within(t, root, 10*time.Second, chromedp.Navigate("about:blank"))
	ctx, cancelA := chromedp.NewContext(root)
	defer cancelA()
	other, cancelB := chromedp.NewContext(root) // a second tab of the same browser
	defer cancelB()
	for _, tab := range []context.Context{ctx, other} {
		require.NoError(t, chromedp.Do(tab)) // open both tabs before either loads
	}
	within(t, ctx, 30*time.Second, chromedp.Navigate(rig.base+"/jobs?status=queued&type=noop"))
	within(t, other, 30*time.Second, chromedp.Navigate(rig.base+"/queues"))
	waitLive(t, ctx, 15*time.Second)
	waitLive(t, other, 15*time.Second)

	rig.restart(t, []byte("fedcba9876543210fedcba9876543210"))

	waitJS(t, ctx, `location.pathname === '/login' && !!document.querySelector('[data-testid="login-form"]')`, 30*time.Second)
	waitJS(t, other, `location.pathname === '/login'`, 30*time.Second)
	next := eval[string](t, ctx, `document.querySelector('input[name="next"]').value`)
	require.Equal(t, "/jobs?status=queued&type=noop", next)

	within(t, ctx, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("#email"), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "browser-test-pw"),
		chromedp.Submit(chromedp.CSS("#password")),
	)
	waitJS(t, ctx, `location.pathname + location.search === '/jobs?status=queued&type=noop'`, 30*time.Second)
	waitLive(t, ctx, 15*time.Second)
}
