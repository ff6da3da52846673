package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// alertsShape is the Alerts page as the browser shows it.
type alertsShape struct {
	Firing     []string `json:"firing"`     // rule/subject of each firing row
	Rules      []string `json:"rules"`      // rule names
	Conditions []string `json:"conditions"` // their conditions in words
	History    int      `json:"history"`
	Deliveries []string `json:"deliveries"` // channel/state of each row
	Cards      int      `json:"cards"`
}

const alertsReport = `(() => {
	const live = document.querySelectorAll('#alerts-live');
	const rows = sel => [...document.querySelectorAll(sel)];
	const cell = (tr, label) => { const td = tr.querySelector('td[data-label="' + label + '"]'); return td ? td.textContent.trim() : ''; };
	return {
		cards: live.length,
		firing: rows('[data-testid="alerts-firing"] tbody tr').map(tr => cell(tr, 'Rule') + '/' + cell(tr, 'Subject')),
		rules: rows('[data-testid="alert-rules"] tbody tr').map(tr => cell(tr, 'Name')),
		conditions: rows('[data-testid="alert-rules"] tbody tr').map(tr => cell(tr, 'Condition')),
		history: rows('[data-testid="alert-history"] tbody tr').length,
		deliveries: rows('[data-testid="alert-deliveries"] tbody tr').map(tr => cell(tr, 'Channel') + '/' + cell(tr, 'State')),
	};
})()`

// TestAlertsInABrowser creates a rule from the form (switching its kind,
// failing validation once), shows its webhook secret once, sends a test
// from the Alerts page, and watches the alert fire and be delivered on the
// page without a reload. FLINT_SCREENSHOTS=dir saves the pages at 1400 and
// 375 px.
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestAlertsInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	hook := &hookReceiver{status: http.StatusOK}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()

	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/alerts"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="alert-rules"]`)))
	s := eval[alertsShape](t, ctx, alertsReport)
	require.Equal(t, 1, s.Cards)
	require.Empty(t, s.Rules)

	// New rule: switch the kind (the form re-renders with its fields), then
	// a bad grace is refused beside its field.
	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="new-rule"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="rule-form"]`)),
		chromedp.SetValue(chromedp.CSS(`#f-kind`), string(domain.AlertNoWorker)))
	require.True(t, eval[bool](t, ctx, `document.querySelector('#f-kind').dispatchEvent(new Event('change', {bubbles: true}))`))
	waitJS(t, ctx, `!!document.querySelector('#f-grace_minutes') && !document.querySelector('#f-threshold_percent')`, 10*time.Second)
	typeInto(t, ctx, `#f-name`, "imports <orphaned>")
	within(t, ctx, 10*time.Second,
		chromedp.SetValue(chromedp.CSS(`#f-queue`), "imports"),
		chromedp.SetValue(chromedp.CSS(`#f-grace_minutes`), "-5"),
		chromedp.SetValue(chromedp.CSS(`#f-webhook_url`), srv.URL+"/slack"))
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="rule-save"]').click(), true)`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="error-grace_minutes"]')`, 10*time.Second)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="error-grace_minutes"]').textContent`), "between 0 and")
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('[data-testid="rule-form"]').length`), "the refused form replaced itself")
	rules, err := rig.store.ListAlertRules(bg)
	require.NoError(t, err)
	require.Empty(t, rules, "nothing was stored")

	within(t, ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS(`#f-grace_minutes`), "1"))
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="rule-save"]').click(), true)`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="rule-saved"]')`, 10*time.Second)
	secret := eval[string](t, ctx, `document.querySelector('[data-testid="webhook-secret"]').textContent.trim()`)
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	rules, err = rig.store.ListAlertRules(bg)
	require.NoError(t, err)
	require.Len(t, rules, 1)
	require.Equal(t, "imports <orphaned>", rules[0].Name)
	require.Equal(t, 60, rules[0].GraceSeconds)
	require.Equal(t, secret, rules[0].WebhookSecret)
	shoot(t, ctx, "alerts-rule-saved")

	// The Alerts page lists it (escaped); "Send test" reaches the receiver.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/alerts"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="rule-test"]`)))
	require.True(t, eval[bool](t, ctx, `(window.loadedLive = document.querySelector('#alerts-live'), true)`))
	waitLive(t, ctx, 10*time.Second)
	// The stream's first poll may refresh the live part once; a click on a
	// button that a refresh is replacing goes nowhere, so let it happen.
	// Nothing says that it will not come: give it a few seconds.
	pollUntil(4*time.Second, 50*time.Millisecond, func() bool {
		return eval[bool](t, ctx, `document.querySelector('#alerts-live') !== window.loadedLive`)
	})
	s = eval[alertsShape](t, ctx, alertsReport)
	require.Equal(t, []string{"imports <orphaned>"}, s.Rules)
	require.Equal(t, []string{"jobs in queue imports wait more than 1 minute with no live worker serving it"}, s.Conditions)
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="rule-test"]').click(), true)`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="rule-test-result"]')`, 15*time.Second)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="rule-test-result"]').textContent`), "Test of “imports <orphaned>” sent by webhook")
	require.Len(t, hook.requests(), 1)
	require.Equal(t, "test", verify(t, secret, hook.requests()[0]).Flint.Event)

	// The queue has waited with no worker for it: the rule fires, and the
	// page shows the alert and its delivery without a reload. (The queue is
	// paused so that this rig's own pool, which serves every queue but is
	// not in the worker registry, leaves the job waiting.)
	_, err = rig.store.UpdateQueue(bg, "imports", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	require.NoError(t, err)
	waiting, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "imports"})
	require.NoError(t, err)
	_, err = rig.store.Pool().Exec(bg, `UPDATE jobs SET run_at = now() - interval '10 minutes' WHERE queue = 'imports'`)
	require.NoError(t, err)
	// The pool takes a later job of another queue: a claim that, had it not
	// seen the pause, would have taken the older job of imports first.
	probe, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "probe"})
	require.NoError(t, err)
	waitStatus(t, rig.store, probe[0].Job.ID, jobs.StateCompleted)
	j, err := rig.store.GetJob(bg, waiting[0].Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, j.Status, "the paused queue's job waits")
	n := notifier(t, nil, nil)
	ok, queued, err := rig.store.EvaluateAlertRules(bg, time.Minute, n.Render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, queued)
	_, err = rig.store.SendDueAlerts(bg, 3, n.Send)
	require.NoError(t, err)
	waitJS(t, ctx, `document.querySelectorAll('[data-testid="alerts-firing"] tbody tr').length === 1 &&
		document.querySelectorAll('[data-testid="alert-deliveries"] tbody tr').length === 1`, 15*time.Second)
	s = eval[alertsShape](t, ctx, alertsReport)
	require.Equal(t, 1, s.Cards, "the live swap replaced the page's live part")
	require.Equal(t, []string{"imports <orphaned>/imports"}, s.Firing)
	require.Equal(t, 1, s.History)
	require.Equal(t, []string{"webhook/sent"}, s.Deliveries)
	require.Equal(t, "firing", verify(t, secret, hook.requests()[1]).Flint.Event)
	shoot(t, ctx, "alerts-firing")
}
