package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// refundHandler charges back in steps around a wait for an approval.
func refundHandler(reg *jobs.Registry) {
	reg.Register("refund", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		if _, err := jobs.Step(ctx, "check", func(context.Context) (string, error) { return "<b>eligible</b>", nil }); err != nil {
			return nil, err
		}
		sig, err := jobs.WaitForSignal(ctx, "approval", 48*time.Hour)
		if err != nil {
			return nil, err
		}
		var a struct{ By string }
		if err := sig.Decode(&a); err != nil {
			return nil, jobs.Permanent(err)
		}
		return jobs.Step(ctx, "refund", func(context.Context) (map[string]string, error) { return map[string]string{"approved_by": a.By}, nil })
	}))
}

// TestSignalFromTheJobPage: a job waiting for a signal shows where it
// waits and its steps; an operator sends the signal from its page with a
// body, the job resumes and completes before their eyes, the steps
// timeline grows, and the signal is in the job's history.
func TestSignalFromTheJobPage(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t, refundHandler)
	var job struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, rig.apiCall(t, http.MethodPost, "/api/v1/jobs", map[string]any{"type": "refund"}, &job))
	waitFor(t, 30*time.Second, "the job to wait for its approval", func() bool {
		var status string
		err := rig.store.Pool().QueryRow(context.Background(), `SELECT status FROM jobs WHERE id = $1`, job.ID).Scan(&status)
		return err == nil && status == "waiting"
	})

	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="count-sleeping"]`)))
	require.Equal(t, map[string]string{"waiting": "1", "sleeping": "0"}, eval[map[string]string](t, ctx, `({
		waiting: document.querySelector('[data-testid="count-waiting"] .stat-value').textContent.trim(),
		sleeping: document.querySelector('[data-testid="count-sleeping"] .stat-value').textContent.trim()})`),
		"the overview counts waiting and sleeping jobs apart")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+job.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="steps-card"]`)))
	waitLive(t, ctx, 10*time.Second)
	type pageShape struct {
		Status  string   `json:"status"`
		Kind    string   `json:"kind"`
		Waiting string   `json:"waiting"`
		Steps   []string `json:"steps"`
		Results []string `json:"results"`
		Name    string   `json:"name"`
		Explain string   `json:"explain"`
	}
	const report = `(() => ({
		status: document.querySelector('#job-live .badge[data-status]').dataset.status,
		kind: (document.querySelector('[data-testid="waiting-for"]') || {dataset: {}}).dataset.kind || '',
		waiting: (document.querySelector('[data-testid="waiting-for"]') || {textContent: ''}).textContent.replace(/\s+/g, ' ').trim(),
		steps: [...document.querySelectorAll('[data-testid="step"]')].map(li => li.dataset.step),
		results: [...document.querySelectorAll('[data-testid="step-result"]')].map(p => p.textContent),
		name: (document.querySelector('[data-testid="signal-name"]') || {value: ''}).value,
		explain: document.body.textContent.includes('Waiting for the signal "approval"') ? 'yes' : 'no',
	}))()`
	p := eval[pageShape](t, ctx, report)
	require.Equal(t, "waiting", p.Status)
	require.Equal(t, "signal", p.Kind)
	require.Contains(t, p.Waiting, "Waiting for the signal approval until")
	require.Equal(t, []string{"check"}, p.Steps)
	require.Equal(t, []string{`"<b>eligible</b>"`}, p.Results, "shown as text")
	require.Equal(t, 0, eval[int](t, ctx, `document.querySelectorAll('[data-testid="step-result"] b').length`), "no markup from a step's result")
	require.Equal(t, "approval", p.Name, "the form names the signal the job waits for")
	require.Equal(t, "yes", p.Explain, "explain says what the job needs")
	shoot(t, ctx, "job-waiting")

	retype(t, ctx, `[data-testid="signal-body"]`, `{"by": "ops"}`)
	// A live update of the page arriving while the operator types (the
	// same request the live stream makes) keeps what they typed.
	eval[bool](t, ctx, `(() => {
		const live = document.getElementById('job-live');
		document.querySelector('[data-testid="signal-form"]').dataset.stale = 'yes';
		htmx.ajax('GET', live.dataset.liveUrl, {target: '#job-live', swap: live.dataset.liveSwap});
		return true;
	})()`)
	waitJS(t, ctx, `!document.querySelector('[data-testid="signal-form"]').dataset.stale`, 10*time.Second)
	require.Equal(t, `{"by": "ops"}`, eval[string](t, ctx, `document.querySelector('[data-testid="signal-body"]').value`),
		"a live update kept the signal's body being typed")
	clickBound(t, ctx, `[data-testid="signal-form"]`, `[data-testid="signal-send"]`)
	waitJS(t, ctx, `document.querySelector('#job-live .badge[data-status]').dataset.status === 'completed'`, 30*time.Second)
	waitJS(t, ctx, `document.querySelectorAll('[data-testid="step"]').length === 2`, 10*time.Second)
	p = eval[pageShape](t, ctx, report)
	require.Equal(t, []string{"check", "refund"}, p.Steps)
	require.JSONEq(t, `{"approved_by": "ops"}`, p.Results[1])
	require.Empty(t, p.Kind, "no longer waiting")
	require.Equal(t, "", p.Name, "no form for a finished job")
	shoot(t, ctx, "job-signalled")

	var audited int
	require.NoError(t, rig.store.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM audit_log WHERE action = 'job_signal' AND job_id = $1 AND actor = 'ops@example.com'`, job.ID).Scan(&audited))
	require.Equal(t, 1, audited, "the signal is audited with who sent it")
}
