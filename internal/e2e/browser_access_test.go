package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/jobs"
)

// signInAs signs in with the given account and waits for the overview.
func signInAs(t *testing.T, ctx context.Context, base, email, password string) {
	t.Helper()
	within(t, ctx, 30*time.Second,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="login-form"]`)),
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="counts"]`)),
	)
}

func visit(t *testing.T, ctx context.Context, url, ready string) {
	t.Helper()
	within(t, ctx, 20*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(ready)))
}

func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	b, _ := json.Marshal(selector)
	return eval[int](t, ctx, `document.querySelectorAll(`+string(b)+`).length`)
}

// TestTeamAccessInABrowser: a viewer sees the dashboard without a control
// it may not use (retry, replay, purge, save settings, Users, Keys), and
// the server refuses such a request sent from the viewer's page anyway; an
// admin adds a person and creates, rotates and revokes a key on the Users
// and Keys pages.
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestTeamAccessInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	bg := context.Background()
	_, err := rig.store.AddUser(bg, "viewer@example.com", "viewer-test-pw", auth.RoleViewer)
	require.NoError(t, err)
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", Payload: json.RawMessage(`{}`), Delay: time.Hour},
		jobs.EnqueueParams{Type: "noop", Payload: json.RawMessage(`{}`), Delay: time.Hour})
	require.NoError(t, err)
	dead, binned := res[0].Job.ID, res[1].Job.ID
	_, err = rig.store.Pool().Exec(bg, `UPDATE jobs SET status = 'dead_letter', finished_at = now() WHERE id = $1`, dead)
	require.NoError(t, err)
	_, err = rig.store.DeleteJob(bg, binned)
	require.NoError(t, err)

	ctx := browser(t)
	signInAs(t, ctx, rig.base, "viewer@example.com", "viewer-test-pw")
	for _, nav := range []string{"/users", "/keys", "/jobs/new"} {
		require.Zero(t, count(t, ctx, `.nav a[href="`+nav+`"]`), "a viewer's nav has no %s", nav)
	}
	require.Equal(t, 1, count(t, ctx, `.nav a[href="/settings"]`))

	visit(t, ctx, rig.base+"/dlq", `[data-testid="jobs-table"]`)
	require.Equal(t, 1, count(t, ctx, `[data-testid="job-row"]`))
	require.Zero(t, count(t, ctx, `[data-testid="replay-all"]`))
	require.Zero(t, count(t, ctx, `button[name="action"]`), "no retry, replay or delete in the bulk bar")
	require.Equal(t, 1, count(t, ctx, `[data-testid="read-only"]`))
	require.Zero(t, count(t, ctx, `input[name="ids"], [data-select-all], [data-selected-count]`), "nothing to select")
	shoot(t, ctx, "dlq-viewer")

	visit(t, ctx, rig.base+"/jobs/"+dead.String(), `#job-live`)
	require.Zero(t, count(t, ctx, `[data-testid^="action-"]`), "no retry, edit, cancel or delete on the job page")

	visit(t, ctx, rig.base+"/bin", `[data-testid="jobs-table"]`)
	require.Equal(t, 1, count(t, ctx, `[data-testid="job-row"]`))
	require.Zero(t, count(t, ctx, `[data-testid="purge-selected"]`))
	require.Zero(t, count(t, ctx, `[data-testid="restore-selected"]`))

	visit(t, ctx, rig.base+"/settings", `[data-testid="settings-form"]`)
	require.Zero(t, count(t, ctx, `[data-testid="settings-save"]`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('[data-testid="settings-form"] fieldset').disabled`))
	require.Equal(t, 1, count(t, ctx, `[data-testid="settings-read-only"]`))

	// Sent anyway from the viewer's page, with its CSRF token: refused.
	status := eval[int](t, ctx, `fetch('/dlq/replay-all', {method: 'POST', headers: {'HX-Request': 'true',
		'X-CSRF-Token': JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']}}).then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status)
	status = eval[int](t, ctx, `fetch('/users').then(r => r.status)`)
	require.Equal(t, http.StatusForbidden, status)
	j, err := rig.store.GetJob(bg, dead)
	require.NoError(t, err)
	require.Equal(t, jobs.StateDeadLetter, j.Status, "the refused replay did nothing")

	// The admin's Users page: add an operator with a generated password.
	click(t, ctx, `form[action="/logout"] button`)
	within(t, ctx, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="login-form"]`)))
	signInAs(t, ctx, rig.base, "ops@example.com", "browser-test-pw")
	require.Equal(t, 1, count(t, ctx, `.nav a[href="/users"]`))
	visit(t, ctx, rig.base+"/users", `[data-testid="users-table"]`)
	require.Equal(t, 2, count(t, ctx, `[data-testid="user-row"]`))
	within(t, ctx, 10*time.Second,
		chromedp.SendKeys(chromedp.CSS("#f-email"), "oncall@example.com"),
		chromedp.SetValue(chromedp.CSS("#f-role"), "operator"))
	click(t, ctx, `[data-testid="user-add"]`)
	within(t, ctx, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="created-password"]`)))
	require.Equal(t, 3, count(t, ctx, `[data-testid="user-row"]`))
	password := eval[string](t, ctx, `document.querySelector('[data-testid="created-password"] code').textContent`)
	u, err := rig.store.Authenticate(bg, "oncall@example.com", password)
	require.NoError(t, err, "the shown password signs in")
	require.Equal(t, auth.RoleOperator, u.Role)
	// Disable the viewer from their row.
	click(t, ctx, `[data-email="viewer@example.com"] [data-testid="user-disable"]`)
	waitJS(t, ctx, `document.querySelector('[data-email="viewer@example.com"]').textContent.includes('disabled')`, 10*time.Second)
	shoot(t, ctx, "users")

	// The Keys page: create a key, use it, rotate it, revoke it.
	visit(t, ctx, rig.base+"/keys", `[data-testid="key-form"]`)
	within(t, ctx, 10*time.Second, chromedp.SendKeys(chromedp.CSS("#f-name"), "billing-service"))
	click(t, ctx, `input[name="scopes"][value="enqueue"]`)
	click(t, ctx, `input[name="scopes"][value="read"]`)
	click(t, ctx, `[data-testid="key-create"]`)
	within(t, ctx, 10*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="key-secret"]`)))
	secret := eval[string](t, ctx, `document.querySelector('[data-testid="secret-value"]').textContent`)
	require.True(t, strings.HasPrefix(secret, auth.KeySecretPrefix))
	require.Equal(t, http.StatusOK, apiStatus(t, rig.base, secret, "GET", "/api/v1/jobs"))
	require.Equal(t, http.StatusForbidden, apiStatus(t, rig.base, secret, "POST", "/api/v1/dlq/retry"))
	require.Equal(t, 1, count(t, ctx, `[data-testid="key-row"]`))

	click(t, ctx, `[data-testid="key-rotate"]`)
	waitJS(t, ctx, `(document.querySelector('[data-testid="secret-value"]') || {}).textContent !== `+jsString(secret), 10*time.Second)
	rotated := eval[string](t, ctx, `document.querySelector('[data-testid="secret-value"]').textContent`)
	require.Equal(t, http.StatusOK, apiStatus(t, rig.base, secret, "GET", "/api/v1/jobs"), "the old secret works in the window")
	require.Equal(t, http.StatusOK, apiStatus(t, rig.base, rotated, "GET", "/api/v1/jobs"))
	shoot(t, ctx, "keys")

	click(t, ctx, `[data-testid="key-revoke"]`)
	waitJS(t, ctx, `document.querySelector('[data-testid="key-row"]').textContent.includes('revoked')`, 10*time.Second)
	require.Equal(t, http.StatusUnauthorized, apiStatus(t, rig.base, rotated, "GET", "/api/v1/jobs"))
	require.Equal(t, http.StatusUnauthorized, apiStatus(t, rig.base, secret, "GET", "/api/v1/jobs"))
}

// click clicks the element in the page as a person would (live-swapped
// regions are clicked through the DOM, not by coordinates).
func click(t *testing.T, ctx context.Context, selector string) {
	t.Helper()
	require.True(t, eval[bool](t, ctx, `(() => { const e = document.querySelector(`+jsString(selector)+`); if (!e) return false; e.click(); return true })()`), "no %s to click", selector)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func apiStatus(t *testing.T, base, key, method, path string) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestDisablingSignsOutAnOpenPage: a person's open dashboard leaves for the
// sign-in page by itself when they are disabled, because the live stream
// re-checks the session and ends (it does not keep streaming to them).
func TestDisablingSignsOutAnOpenPage(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	bg := context.Background()
	u, err := rig.store.AddUser(bg, "leaver@example.com", "leaver-test-pw", auth.RoleOperator)
	require.NoError(t, err)
	ctx := browser(t)
	signInAs(t, ctx, rig.base, "leaver@example.com", "leaver-test-pw")
	visit(t, ctx, rig.base+"/jobs", `[data-testid="jobs-table"]`)
	waitJS(t, ctx, `document.querySelector('[data-live]').getAttribute('data-state') === 'open'`, 15*time.Second)

	_, err = rig.store.DisableUser(bg, u.ID)
	require.NoError(t, err)
	// One re-check interval (5 s) and a reload.
	waitJS(t, ctx, `location.pathname === '/login' && !!document.querySelector('[data-testid="login-form"]')`, 20*time.Second)
}
