package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// explainShape is the job page's "why" panel as the browser shows it.
type explainShape struct {
	Panels  int      `json:"panels"`
	Heading string   `json:"heading"`
	Codes   []string `json:"codes"`
	Links   []string `json:"links"`
}

const explainReport = `(() => {
	const p = document.querySelectorAll('#job-live [data-testid="explain"]');
	const first = p[0];
	return {
		panels: p.length,
		heading: first ? first.querySelector('h2').textContent.trim() : '',
		codes: first ? [...first.querySelectorAll('li[data-reason]')].map(li => li.dataset.reason) : [],
		links: first ? [...first.querySelectorAll('li a')].map(a => a.getAttribute('href')) : [],
	};
})()`

// TestJobPageExplainsLive opens the page of a job blocked on another one,
// sees why, and watches the reason change without a reload when the job it
// waits for is cancelled. FLINT_SCREENSHOTS=dir saves the page at 1400 and
// 375 px.
func TestJobPageExplainsLive(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	later := time.Now().Add(time.Hour)
	parent, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "noop", RunAt: &later})
	require.NoError(t, err)
	child, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "report.build", DependsOn: []uuid.UUID{parent[0].Job.ID}})
	require.NoError(t, err)
	pid, cid := parent[0].Job.ID, child[0].Job.ID
	// The rig's workers, as a worker process's heartbeat registers them:
	// they serve every queue, without a handler for report.build.
	require.NoError(t, rig.store.RegisterWorker(bg, domain.WorkerInfo{ID: "browser", Types: rig.registry.Types(), Concurrency: 4,
		StartedAt: time.Now()}, time.Minute))

	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/jobs/"+cid.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="explain"]`)))
	waitLive(t, ctx, 10*time.Second)
	s := eval[explainShape](t, ctx, explainReport)
	require.Equal(t, 1, s.Panels)
	require.Equal(t, "Why it is blocked", s.Heading)
	require.Equal(t, []string{"blocked", "no_worker_for_type"}, s.Codes, "no live worker has a handler for report.build")
	require.Equal(t, []string{"/jobs/" + pid.String()}, s.Links)
	shoot(t, ctx, "explain-blocked")

	_, err = rig.store.CancelJob(bg, pid)
	require.NoError(t, err)
	waitJS(t, ctx, `[...document.querySelectorAll('#job-live [data-testid="explain"] li[data-reason]')].map(li => li.dataset.reason).join() === 'cancelled_by_dependency'`, 15*time.Second)
	s = eval[explainShape](t, ctx, explainReport)
	require.Equal(t, 1, s.Panels, "the live swap replaced the panel rather than adding one")
	require.Equal(t, "Why it is cancelled", s.Heading)
	require.Equal(t, []string{"/jobs/" + pid.String()}, s.Links)
	require.LessOrEqual(t, eval[int](t, ctx, `document.documentElement.scrollWidth`), 1400)
	shoot(t, ctx, "explain-cancelled")
}

// shoot saves the page at 1400 and 375 px wide when FLINT_SCREENSHOTS names
// a directory, and checks that it does not scroll sideways at either.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("FLINT_SCREENSHOTS")
	for _, w := range []int64{1400, 375} {
		within(t, ctx, 10*time.Second, chromedp.EmulateViewport(w, 900))
		require.LessOrEqual(t, eval[int](t, ctx, `document.documentElement.scrollWidth`), int(w), "%s at %d px scrolls sideways", name, w)
		if dir == "" {
			continue
		}
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+"-"+strconv.Itoa(int(w))+".png"), png, 0o644))
	}
	within(t, ctx, 10*time.Second, chromedp.EmulateViewport(1400, 900))
}

// TestEditAndReplayInABrowser edits a dead-letter job's payload from its
// page, previews the change and replays it.
func TestEditAndReplayInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	zero := 0
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "fail", MaxRetries: &zero,
		Payload: []byte(`{"message":"disk full"}`)})
	require.NoError(t, err)
	id := res[0].Job.ID
	waitStatus(t, rig.store, id, jobs.StateDeadLetter)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+id.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="action-edit-replay"]`)))
	// The live part may be swapped at any moment (the job just reached the
	// DLQ): click whichever button is on the page now.
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('[data-testid="action-edit-replay"]').click(); return true })()`))
	within(t, ctx, 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="replay-payload"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="replay-payload"]`), `{"message": "disk almost full"}`))
	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS(`[data-testid="replay-preview"]`)),
		chromedp.WaitVisible(chromedp.CSS(`pre[data-testid="replay-diff"]`)))
	diff := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="replay-diff"] span:not(.diff-same)')].map(s => s.textContent.trim())`)
	require.Equal(t, []string{`-   "message": "disk full"`, `+   "message": "disk almost full"`}, diff)
	shoot(t, ctx, "replay-diff")
	require.Equal(t, jobs.StateDeadLetter, mustGet(t, rig, id).Status, "a preview changes nothing")

	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS(`[data-testid="replay-confirm"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="explain"]`)),
	)
	require.Equal(t, "/jobs/"+id.String(), eval[string](t, ctx, `location.pathname`))
	j := mustGet(t, rig, id)
	require.JSONEq(t, `{"message": "disk almost full"}`, string(j.Payload))
	// Replayed: it runs again (and, being a "fail" job, fails again).
	require.Eventually(t, func() bool { return mustGet(t, rig, id).Executions == 2 }, 20*time.Second, 50*time.Millisecond)
}

func mustGet(t *testing.T, rig *dashboardRig, id uuid.UUID) *jobs.Job {
	t.Helper()
	j, err := rig.store.GetJob(context.Background(), id)
	require.NoError(t, err)
	return j
}

// TestJobPageFollowsProgressAndLog watches a running job's page: its
// progress bar and its log fill in without a reload while the handler
// works, and the page settles on the finished job.
func TestJobPageFollowsProgressAndLog(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	rig.registry.Register("report.slow", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		jobs.Logger(ctx).Info("loading the ledger", "rows", 1200)
		jobs.ReportProgress(ctx, 30, "phase 1 of 3")
		<-release
		jobs.Logger(ctx).Info("ledger written")
		return nil, nil
	}))
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "report.slow"})
	require.NoError(t, err)
	id := res[0].Job.ID

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+id.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-log"]`)))
	waitLive(t, ctx, 10*time.Second)
	waitJS(t, ctx, `(() => { const p = document.querySelector('#job-live [data-testid="progress"]'); return !!p && p.textContent.includes('30%') && p.textContent.includes('phase 1 of 3') })()`, 15*time.Second)
	waitJS(t, ctx, `[...document.querySelectorAll('[data-testid="job-log"] li[data-source="handler"]')].some(li => li.textContent.includes('loading the ledger') && li.textContent.includes('rows=1200'))`, 15*time.Second)
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('[data-testid="job-log"]').length`))
	shoot(t, ctx, "job-running")

	// The jobs list shows the bar on the running job's row.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?status=running"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="progress"]`)))
	require.Equal(t, "30", eval[string](t, ctx, `document.querySelector('tr [data-testid="progress"] progress').getAttribute('value')`))
	shoot(t, ctx, "jobs-running")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+id.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-log"]`)))
	waitLive(t, ctx, 10*time.Second)

	once.Do(func() { close(release) })
	waitJS(t, ctx, `(() => { const items = [...document.querySelectorAll('[data-testid="job-log"] li')]; return items.length > 0 && items[items.length-1].textContent.includes('Succeeded in') })()`, 20*time.Second)
	// The log and the status part are swapped by separate updates, so the
	// bar may outlive the log's last line by one swap; it must then go.
	waitJS(t, ctx, `document.querySelectorAll('#job-live [data-testid="progress"]').length === 0 && !!document.querySelector('#job-live [data-status="completed"]')`, 15*time.Second)
	require.Equal(t, "", eval[string](t, ctx, `document.querySelector('[data-testid="job-log"]').getAttribute('hx-get') || ''`), "the finished job's log stops polling")
	require.Equal(t, []string{"flint", "handler", "handler", "flint"},
		eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="job-log"] li')].map(li => li.dataset.source)`))
}

// TestReplayedJobReadsTruthfully: a dead-letter job edited and replayed
// that then completes shows no "Last error", its log still says the first
// failure moved it to the dead-letter queue (history is never rewritten),
// and the History card and the audit page spell the replay's details out
// as fields rather than raw JSON.
func TestReplayedJobReadsTruthfully(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	zero := 0
	res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "fail", MaxRetries: &zero,
		Payload: []byte(`{"message":"boom"}`)})
	require.NoError(t, err)
	id := res[0].Job.ID
	waitStatus(t, rig.store, id, jobs.StateDeadLetter)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+id.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="action-edit-replay"]`)))
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('[data-testid="action-edit-replay"]').click(); return true })()`))
	within(t, ctx, 20*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="replay-payload"]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid="replay-payload"]`), `{"message": "boom", "times": 0}`))
	within(t, ctx, 20*time.Second,
		chromedp.Click(chromedp.CSS(`[data-testid="replay-preview"]`)),
		chromedp.WaitVisible(chromedp.CSS(`pre[data-testid="replay-diff"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="replay-confirm"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="explain"]`)))
	waitStatus(t, rig.store, id, jobs.StateCompleted)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+id.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-log"]`)))
	require.Zero(t, count(t, ctx, `[data-testid="last-error"]`), "a completed job shows no last error")
	log := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="job-log"] li[data-source="flint"] .msg')].map(m => m.textContent)`)
	require.Len(t, log, 4, "claimed, failed, claimed, succeeded: %q", log)
	require.Regexp(t, `^Failed after .*: boom\. Moved to the dead-letter queue\.$`, log[1])
	require.Regexp(t, `^Succeeded in `, log[3])

	type field struct{ Key, Value string }
	details := `(sel) => [...document.querySelectorAll(sel + ' [data-testid="audit-row"]')].map(r => ({
		action: r.querySelector('strong').textContent,
		fields: [...r.querySelectorAll('[data-testid="audit-details"] dt')].map(dt => ({Key: dt.textContent, Value: dt.nextElementSibling.textContent.trim()})),
		raw: r.querySelector('[data-testid="audit-details"]').textContent.trim().startsWith('{')}))`
	type row struct {
		Action string  `json:"action"`
		Fields []field `json:"fields"`
		Raw    bool    `json:"raw"`
	}
	check := func(rows []row) {
		t.Helper()
		require.NotEmpty(t, rows)
		for _, r := range rows {
			require.False(t, r.Raw, "%s details shown as raw JSON", r.Action)
			require.NotEmpty(t, r.Fields, "%s details have no fields", r.Action)
		}
	}
	check(eval[[]row](t, ctx, `(`+details+`)('main')`))
	shoot(t, ctx, "job-replayed")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/audit"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="audit-row"]`)))
	check(eval[[]row](t, ctx, `(`+details+`)('main')`))
	shoot(t, ctx, "audit-fields")
}
