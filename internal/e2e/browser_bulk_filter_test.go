package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// confirmAndClick clicks the button sel after making the page's
// confirmation dialog record its question (and accept), and returns the
// question.
func confirmAndClick(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	waitJS(t, ctx, `!!document.querySelector(`+jsString(sel)+`)`, 15*time.Second)
	return eval[string](t, ctx, `(() => {
		let asked = '';
		window.confirm = q => { asked = q; return true; };
		document.querySelector(`+jsString(sel)+`).click();
		return asked;
	})()`)
}

// auditOf is the audit trail of one job, newest first.
func auditOf(t *testing.T, rig *dashboardRig, id uuid.UUID) []domain.AuditEntry {
	t.Helper()
	es, err := rig.store.ListAudit(context.Background(), domain.AuditQuery{JobID: &id})
	require.NoError(t, err)
	return es
}

// TestBulkActionsFollowTheFilter: Replay all and Delete all on the
// dead-letter queue act on what its filter and its error groups show, not
// on the whole queue; the Bin counts, filters and restores all it shows;
// the Jobs list acts on every job its filter shows. Each confirms with the
// count it then touches and is audited with its filter.
//
//flint:long a browser scenario: one operator's triage, step after step, reads best top to bottom
func TestBulkActionsFollowTheFilter(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	rig := startDashboard(t, func(r *jobs.Registry) {
		r.Register("charge", jobs.HandlerFunc(func(_ context.Context, j *jobs.Job) (any, error) {
			if broken.Load() {
				var p struct{ Error string }
				_ = json.Unmarshal(j.Payload, &p)
				return nil, errors.New(p.Error)
			}
			return nil, nil
		}))
	})
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	zero := 0
	fail := func(queue, msg string) uuid.UUID {
		t.Helper()
		res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "charge", Queue: queue, MaxRetries: &zero,
			Payload: json.RawMessage(`{"error": ` + jsString(msg) + `}`)})
		require.NoError(t, err)
		waitStatus(t, rig.store, res[0].Job.ID, jobs.StateDeadLetter)
		return res[0].Job.ID
	}
	billing := []uuid.UUID{fail("billing", "card declined"), fail("billing", "card declined"), fail("billing", "gateway timeout")}
	others := []uuid.UUID{fail("default", "gateway timeout"), fail("default", "gateway timeout")}
	broken.Store(false)
	total := `document.querySelector('[data-testid="dlq-total"]').textContent.replace(/\s+/g, ' ').trim()`

	// Replay all on queue=billing: its three, confirmed as three.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?queue=billing"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="replay-all"]`)))
	waitLive(t, ctx, 15*time.Second)
	shoot(t, ctx, "dlq-bulk-filtered")
	asked := confirmAndClick(t, ctx, `[data-testid="replay-all"]`)
	require.Contains(t, asked, "Replay all 3 jobs this filter shows?")
	waitJS(t, ctx, `!!document.querySelector('[data-testid="jobs-table"] [data-testid="empty"]')`, 20*time.Second)
	require.Equal(t, "No dead-letter jobs match this filter.", eval[string](t, ctx, `document.querySelector('[data-testid="empty"]').textContent.trim()`))
	for _, id := range billing {
		waitStatus(t, rig.store, id, jobs.StateCompleted)
		es := auditOf(t, rig, id)
		require.Equal(t, "dlq_replay", es[0].Action)
		var d struct {
			Scope   string
			Filter  map[string]string
			Matched int
		}
		require.NoError(t, json.Unmarshal(es[0].Details, &d))
		require.Equal(t, "filter", d.Scope)
		require.Equal(t, map[string]string{"list": "dlq", "queue": "billing"}, d.Filter)
		require.Equal(t, 3, d.Matched)
	}
	for _, id := range others {
		require.Equal(t, jobs.StateDeadLetter, waitStatus(t, rig.store, id, jobs.StateDeadLetter).Status, "another queue's job stays")
	}
	waitJS(t, ctx, total+` === '0 jobs of 2 in the queue'`, 15*time.Second)

	// An error group's jobs: Delete all moves those two, and only those.
	broken.Store(true)
	third := fail("mail", "smtp 550")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?view=errors"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="dlq-group-show"]`)))
	require.True(t, eval[bool](t, ctx, `([...document.querySelectorAll('[data-testid="dlq-group"]')].find(r => r.textContent.includes('gateway timeout')).querySelector('a').click(), true)`))
	within(t, ctx, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="delete-all"]`)))
	require.Len(t, eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`), 2)
	asked = confirmAndClick(t, ctx, `[data-testid="delete-all"]`)
	require.Contains(t, asked, "Move all 2 jobs this filter shows to the bin?")
	waitJS(t, ctx, `!!document.querySelector('[data-testid="jobs-table"] [data-testid="empty"]')`, 20*time.Second)
	require.Equal(t, jobs.StateDeadLetter, waitStatus(t, rig.store, third, jobs.StateDeadLetter).Status, "the other group's job stays")
	page, err := rig.store.ListJobs(bg, domain.ListParams{InBin: true})
	require.NoError(t, err)
	require.ElementsMatch(t, others, []uuid.UUID{page.Jobs[0].ID, page.Jobs[1].ID})

	// The Bin: counted, filtered, and restored by its filter.
	_, err = rig.store.DeleteJob(bg, billing[0])
	require.NoError(t, err)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/bin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="bin-filters"]`)))
	require.Equal(t, "3 jobs", eval[string](t, ctx, total))
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/bin?queue=default"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="restore-all"]`)))
	require.Equal(t, "2 jobs of 3 in the bin", eval[string](t, ctx, total))
	shoot(t, ctx, "bin-filtered")
	asked = confirmAndClick(t, ctx, `[data-testid="restore-all"]`)
	require.Contains(t, asked, "Restore all 2 jobs this filter shows?")
	waitJS(t, ctx, `!!document.querySelector('[data-testid="jobs-table"] [data-testid="empty"]')`, 20*time.Second)
	require.Equal(t, "No deleted jobs match this filter.", eval[string](t, ctx, `document.querySelector('[data-testid="empty"]').textContent.trim()`))
	waitJS(t, ctx, total+` === '0 jobs of 1 in the bin'`, 15*time.Second)
	for _, id := range others {
		j := waitStatus(t, rig.store, id, jobs.StateDeadLetter)
		require.Nil(t, j.DeletedAt, "restored")
		require.Equal(t, "restore", auditOf(t, rig, id)[0].Action)
	}
	j, err := rig.store.GetJob(bg, billing[0])
	require.NoError(t, err)
	require.NotNil(t, j.DeletedAt, "the other queue's job stays in the bin")

	// The Jobs list, filtered: Cancel all touches what the filter shows.
	later := time.Now().Add(time.Hour)
	var waiting []uuid.UUID
	for _, q := range []string{"nightly", "nightly", "nightly", "default"} {
		res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: q, RunAt: &later})
		require.NoError(t, err)
		waiting = append(waiting, res[0].Job.ID)
	}
	// Opened on another state, then filtered in place: the actions follow
	// the filter the table shows.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=running&queue=nightly"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="empty"]`)))
	require.Zero(t, count(t, ctx, `[data-testid="bulk-all"] button`))
	require.True(t, eval[bool](t, ctx, `(() => { const s = document.querySelector('#f-status'); s.value = 'scheduled';
		s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`))
	waitJS(t, ctx, `(document.querySelector('[data-testid="cancel-all"]') || {}).textContent === 'Cancel all 3'`, 15*time.Second)
	shoot(t, ctx, "jobs-bulk-filtered")
	asked = confirmAndClick(t, ctx, `[data-testid="cancel-all"]`)
	require.Contains(t, asked, "Cancel all 3 jobs this filter shows?")
	waitJS(t, ctx, `!!document.querySelector('[data-testid="jobs-table"] [data-testid="empty"]')`, 20*time.Second)
	require.Equal(t, "No scheduled jobs match this filter.", eval[string](t, ctx, `document.querySelector('[data-testid="empty"]').textContent.trim()`))
	for _, id := range waiting[:3] {
		require.Equal(t, jobs.StateCancelled, waitStatus(t, rig.store, id, jobs.StateCancelled).Status)
	}
	require.Equal(t, jobs.StateScheduled, waitStatus(t, rig.store, waiting[3], jobs.StateScheduled).Status, "another queue's job is left")

	// An unfiltered Jobs list offers no action on all its jobs.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	require.Zero(t, count(t, ctx, `[data-testid="bulk-all"] button`))
}
