package e2e

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/jobs"
)

// longError is what the failing handler of these tests returns: long
// enough that a table cutting it short shows.
const longError = "connection to billing.internal.example.com:5432 refused while charging the customer's card for invoice 1234 (ending in ZZTAIL)"

// registerBoom adds a handler that always fails with longError.
func registerBoom(r *jobs.Registry) {
	r.Register("boom", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) {
		return nil, errors.New(longError)
	}))
}

// failThrice runs one boom job in queue three times (a replay after each
// failure) and returns it: three failed runs of one job.
func failThrice(t *testing.T, s *db.Store, queue string) uuid.UUID {
	t.Helper()
	zero := 0
	res, err := s.Enqueue(context.Background(), jobs.EnqueueParams{Type: "boom", Queue: queue, MaxRetries: &zero})
	require.NoError(t, err)
	id := res[0].Job.ID
	for i := range 3 {
		waitStatus(t, s, id, jobs.StateDeadLetter)
		if i < 2 {
			_, err = s.RetryJob(context.Background(), id)
			require.NoError(t, err)
			waitFor(t, 10*time.Second, "the replay to leave the DLQ", func() bool {
				j, err := s.GetJob(context.Background(), id)
				require.NoError(t, err)
				return j.Executions > i+1 || j.Status != jobs.StateDeadLetter
			})
		}
	}
	return id
}

type failureRowShape struct {
	ID       string `json:"id"`
	Error    string `json:"error"`
	Count    string `json:"count"`
	Hidden   bool   `json:"hidden"` // part of the error is cut off
	ErrWidth int    `json:"errWidth"`
}

// failureRowsJS reads the recent failures table inside root.
const failureRowsJS = `(root => [...document.querySelectorAll(root + ' [data-testid="failure-row"]')].map(r => {
	const e = r.querySelector('[data-testid="failure-error"]'), n = r.querySelector('[data-testid="failure-count"]');
	return {id: r.dataset.jobId, error: e.textContent.trim(), count: n ? n.textContent.trim() : '',
		hidden: e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1, errWidth: e.clientWidth};
}))`

// TestQueuePageInABrowser: the Queues page counts failed runs, retrying
// and dead-letter jobs per queue; a queue's page pauses and resumes it,
// edits its limits (the refusal in the form's words, not the API's),
// draws its throughput and lists its recent failures, one row per job
// with its whole error. The overview's recent failures list that job once.
func TestQueuePageInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t, registerBoom)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	id := failThrice(t, rig.store, "billing")
	_, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "billing"})
	require.NoError(t, err)

	// The Queues page: failed runs, retrying and dead-letter columns.
	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/queues"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="billing"]`)))
	require.Equal(t, []string{"Queue", "State", "Queued", "Running", "Failed", "Retrying", "Dead letter", "Oldest wait", "Finished", "Limits", ""},
		eval[[]string](t, ctx, `[...document.querySelectorAll('#queues-live thead th')].map(th => th.textContent.trim())`))
	row := `tr[data-queue="billing"] `
	waitJS(t, ctx, `document.querySelector('`+row+`[data-testid="queue-failed"]').textContent.trim() === '3'`, 15*time.Second)
	require.Equal(t, "1", eval[string](t, ctx, `document.querySelector('`+row+`[data-testid="queue-dead"]').textContent.trim()`))
	require.Equal(t, "/queues/billing#queue-failures", eval[string](t, ctx, `new URL(document.querySelector('`+row+`[data-testid="queue-failed"] a').href).pathname + new URL(document.querySelector('`+row+`[data-testid="queue-failed"] a').href).hash`))

	// The queue's page.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/queues/billing"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="queue-detail"]`)))
	waitLive(t, ctx, 10*time.Second)
	rows := eval[[]failureRowShape](t, ctx, failureRowsJS+`('[data-testid="queue-failures"]')`)
	require.Len(t, rows, 1, "one row per job, not one per failed run")
	require.Equal(t, id.String(), rows[0].ID)
	require.Equal(t, "3 failed runs", rows[0].Count)
	require.Equal(t, longError, rows[0].Error)
	require.False(t, rows[0].Hidden, "the whole error shows at 1400 px")
	require.Greater(t, eval[int](t, ctx, `document.querySelectorAll('[data-testid="queue-throughput"] svg rect.bad, [data-testid="queue-throughput"] svg rect').length`), 0, "the chart draws the queue's runs")
	require.Equal(t, "Finished runs of queue billing per minute over the last hour",
		eval[string](t, ctx, `document.querySelector('[data-testid="queue-throughput"] svg').getAttribute('aria-label')`))
	shoot(t, ctx, "queue-page")

	// Pause from the page: the badge and the button change, the queue is
	// paused everywhere.
	clickBound(t, ctx, `[data-testid="queue-pause"]`, `[data-testid="queue-pause"]`)
	waitJS(t, ctx, `!!document.querySelector('[data-testid="queue-actions"] [data-testid="queue-resume"]') && document.querySelector('[data-testid="queue-actions"]').textContent.includes('paused')`, 10*time.Second)
	require.True(t, rig.store.QueuePaused("billing"))
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('[data-testid="queue-failures"]').length`), "the page is whole after the action")

	// The limits editor: a refusal in the form's words, under its field.
	setLimit := func(v string) {
		waitJS(t, ctx, `[...document.querySelectorAll('#queue-live form, #queue-live button')].every(e => e['htmx-internal-data'])`, 10*time.Second)
		require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('#queue-live details.queue-limits').open = true;
			document.querySelector('#queue-live input[name="concurrency"]').value = `+jsString(v)+`;
			document.querySelector('#queue-live [data-testid="queue-save"]').click(); return true })()`))
	}
	setLimit("0")
	waitJS(t, ctx, `!!document.querySelector('#queue-live [data-testid="limit-error-concurrency"]')`, 10*time.Second)
	waitJS(t, ctx, `[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Not saved'))`, 10*time.Second)
	toastText := eval[string](t, ctx, `[...document.querySelectorAll('.toast')].map(e => e.textContent).join(' | ')`)
	require.NotContains(t, toastText, "null", "the toast speaks of the form, not the API")
	require.Contains(t, toastText, "At once")
	require.True(t, eval[bool](t, ctx, `document.querySelector('#queue-live details.queue-limits').open`), "the form stays open with what to fix")
	setLimit("2")
	waitJS(t, ctx, `document.querySelector('#queue-live [data-testid="queue-limits"]').textContent.includes('2 at once')`, 10*time.Second)
	q, err := rig.store.GetQueue(context.Background(), "billing")
	require.NoError(t, err)
	require.Equal(t, 2, *q.Concurrency)

	// Resume.
	clickBound(t, ctx, `[data-testid="queue-resume"]`, `[data-testid="queue-resume"]`)
	waitJS(t, ctx, `!!document.querySelector('[data-testid="queue-actions"] [data-testid="queue-pause"]')`, 10*time.Second)
	require.False(t, rig.store.QueuePaused("billing"))

	// The overview lists the job once, with its whole error.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="recent-failures"]`)))
	rows = eval[[]failureRowShape](t, ctx, failureRowsJS+`('body')`)
	require.Len(t, rows, 1)
	require.Equal(t, "3 failed runs", rows[0].Count)
	require.False(t, rows[0].Hidden, "the overview shows the whole error at 1400 px: %+v", rows[0])
	require.Greater(t, rows[0].ErrWidth, 250)
	shoot(t, ctx, "overview-failures")
}

// TestJobsPagerURL: the jobs list's next page is a clean address: each
// filter once, no empty ones, no selection.
func TestJobsPagerURL(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	later := time.Now().Add(time.Hour)
	ps := make([]jobs.EnqueueParams, 120)
	for i := range ps {
		ps[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "pages", RunAt: &later}
	}
	_, err := rig.store.Enqueue(context.Background(), ps...)
	require.NoError(t, err)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=scheduled&queue=pages"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="next-page"]`)))
	for page := 2; page <= 3; page++ {
		before := eval[string](t, ctx, `location.href`)
		clickBound(t, ctx, `[data-testid="next-page"]`, `[data-testid="next-page"]`)
		waitJS(t, ctx, `location.href !== `+jsString(before), 10*time.Second)
		u, err := url.Parse(eval[string](t, ctx, `location.href`))
		require.NoError(t, err)
		q := u.Query()
		require.Equal(t, []string{"scheduled"}, q["status"], "page %d: %s", page, u)
		require.Equal(t, []string{"pages"}, q["queue"], "page %d: %s", page, u)
		require.Len(t, q["cursor"], 1, "page %d: %s", page, u)
		require.Equal(t, []string{strconv.Itoa(page)}, q["page"], "page %d: its number, for the page jump", page)
		require.Len(t, q, 4, "page %d carries the filters once and nothing else: %s", page, u)
	}
}
