package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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

// registerAwaitApproval adds a durable handler that waits two days for an
// "approval" signal.
func registerAwaitApproval(r *jobs.Registry) {
	r.Register("await-approval", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
		sig, err := jobs.WaitForSignal(ctx, "approval", 48*time.Hour)
		return sig, err
	}))
}

// firingRow is a row of the Alerts page's "Firing now" table.
type firingRow struct {
	Rule       string   `json:"rule"`
	Nobody     bool     `json:"nobody"`
	Deliveries []string `json:"deliveries"` // state: channel to target
	Text       string   `json:"text"`
}

const firingRowsJS = `[...document.querySelectorAll('[data-testid="alerts-firing"] tbody tr')].map(tr => ({
	rule: tr.querySelector('td[data-label="Rule"]').textContent.trim(),
	nobody: !!tr.querySelector('[data-testid="alert-nobody"]'),
	deliveries: [...tr.querySelectorAll('[data-testid="alert-delivery"]')].map(li => li.dataset.state + ': ' + li.querySelector('span.small').textContent.trim()),
	text: tr.textContent.replace(/\s+/g, ' '),
}))`

// TestAlertReachInABrowser: a rule that reaches nobody (no channels of its
// own, alert_emails empty) is said so when created, in the form and the
// API, and on the rules list; when it fires, its alert says it notified
// nobody instead of "Notified 1×", while the alert of a rule with a
// webhook shows where it went and how the delivery went. The rules watch
// a job that waits for a signal longer than a threshold (job_waiting).
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestAlertReachInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t, registerAwaitApproval)
	hook := &hookReceiver{status: http.StatusInternalServerError}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()

	// Created from the form: the saved rule says it reaches nobody.
	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/alerts/rules/new?kind=job_waiting"),
		chromedp.WaitVisible(chromedp.CSS(`#f-threshold_minutes`)))
	require.False(t, eval[bool](t, ctx, `!!document.querySelector('#f-grace_minutes') || !!document.querySelector('#f-threshold_percent')`))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="rule-no-fallback"]').textContent`), "reach nobody", "the form warns before the save")
	typeInto(t, ctx, `#f-name`, "refunds stuck")
	within(t, ctx, 10*time.Second, chromedp.SetValue(chromedp.CSS(`#f-queue`), "refunds"), chromedp.SetValue(chromedp.CSS(`#f-threshold_minutes`), "5"))
	require.True(t, eval[bool](t, ctx, `(document.querySelector('[data-testid="rule-save"]').click(), true)`))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="rule-saved"]')`, 10*time.Second)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="rule-nobody-warning"]').textContent`), "reaches nobody")
	shoot(t, ctx, "alert-rule-nobody")
	rules, err := rig.store.ListAlertRules(bg)
	require.NoError(t, err)
	require.Len(t, rules, 1)
	require.Equal(t, domain.AlertJobWaiting, rules[0].Kind)
	require.EqualValues(t, 300, rules[0].Threshold)

	// The API says so too, and names where a rule with a webhook reaches.
	api := func(body string) map[string]any {
		req, err := http.NewRequest(http.MethodPost, rig.base+"/api/v1/alerts/rules", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-API-Key", "browser-test-api-key")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	quiet := api(`{"kind":"job_waiting","name":"quiet","queue":"nowhere","threshold":60}`)
	require.Equal(t, []any{}, quiet["reaches"])
	require.Contains(t, quiet["warning"], "reaches nobody")
	hooked := api(`{"kind":"job_waiting","name":"hooked","queue":"refunds","threshold":60,"webhook_url":"` + srv.URL + `/hook"}`)
	require.Equal(t, []any{"webhook " + srv.URL + "/…"}, hooked["reaches"])
	require.NotContains(t, hooked, "warning")

	// A job waits for its approval, for ten minutes now.
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "await-approval", Queue: "refunds"})
	require.NoError(t, err)
	waitStatus(t, rig.store, res[0].Job.ID, jobs.StateWaiting)
	_, err = rig.store.Pool().Exec(bg, `UPDATE jobs SET updated_at = now() - interval '10 minutes' WHERE id = $1`, res[0].Job.ID)
	require.NoError(t, err)
	n := notifier(t, nil, nil)
	ok, queued, err := rig.store.EvaluateAlertRules(bg, time.Minute, n.Render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, queued, "only the rule with a webhook has anywhere to send")
	_, err = rig.store.SendDueAlerts(bg, 3, n.Send)
	require.NoError(t, err)
	require.Len(t, hook.requests(), 1, "the webhook was tried (and answered 500)")
	alerts, err := rig.store.ListAlerts(bg, domain.AlertQuery{Status: "firing"})
	require.NoError(t, err)
	notified, went := map[string]int{}, map[string][]string{}
	type deliveries struct {
		Deliveries []struct{ Channel, Status string } `json:"deliveries"`
	}
	for _, a := range alerts {
		notified[a.RuleName] = a.Notifications
		require.Contains(t, a.Message, "slept or waited for a signal or event")
		went[a.RuleName] = []string{}
		for _, d := range apiGet[deliveries](t, rig, fmt.Sprintf("/api/v1/alerts/deliveries?alert_id=%d", a.ID)).Deliveries {
			went[a.RuleName] = append(went[a.RuleName], d.Channel+" "+d.Status)
		}
	}
	require.Equal(t, map[string]int{"refunds stuck": 0, "hooked": 1}, notified)
	require.Equal(t, map[string][]string{"refunds stuck": {}, "hooked": {"webhook pending"}}, went, "where each firing went, through the API")

	// The Alerts page: where each firing went, and who reaches nobody.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/alerts"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="alerts-firing"] tbody tr`)))
	rows := eval[[]firingRow](t, ctx, firingRowsJS)
	require.Len(t, rows, 2)
	byRule := map[string]firingRow{}
	for _, r := range rows {
		require.NotContains(t, r.Text, "×", "no bare notification count")
		byRule[r.Rule] = r
	}
	require.True(t, byRule["refunds stuck"].Nobody)
	require.Empty(t, byRule["refunds stuck"].Deliveries)
	require.False(t, byRule["hooked"].Nobody)
	require.Equal(t, []string{"retrying: webhook to " + strings.TrimPrefix(srv.URL, "http://")}, byRule["hooked"].Deliveries)
	require.Contains(t, byRule["hooked"].Text, "500", "the delivery's error shows")
	require.Equal(t, []bool{true, false, true}, eval[[]bool](t, ctx,
		`['refunds stuck', 'hooked', 'quiet'].map(n => !![...document.querySelectorAll('[data-testid="alert-rules"] tbody tr')].find(tr => tr.textContent.includes(n)).querySelector('[data-testid="rule-nobody"]'))`))
	require.Equal(t, []string{"hooked · refunds"}, eval[[]string](t, ctx,
		`[...document.querySelectorAll('[data-testid="delivery-row"] td[data-label="Alert"]')].map(td => td.textContent.trim())`))
	require.NotContains(t, eval[string](t, ctx, `document.querySelector('[data-testid="alert-deliveries"]').textContent`), "Nothing has been sent yet")
	shoot(t, ctx, "alerts-reach")
}
