package e2e

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestListsOrderByTimeAndJumpToAPage: the dead-letter queue lists by when
// jobs failed, not when they were created, and jumps to a page by number;
// the Jobs list orders by creation, start or finish time either way.
func TestListsOrderByTimeAndJumpToAPage(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	zero := 0
	// Three dead jobs, created a, b, c; a failed last (after a replay, say).
	var dead []uuid.UUID
	for range 3 {
		res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: "fail", Queue: "pay", MaxRetries: &zero, Payload: []byte(`{"message": "no"}`)})
		require.NoError(t, err)
		waitStatus(t, rig.store, res[0].Job.ID, jobs.StateDeadLetter)
		dead = append(dead, res[0].Job.ID)
	}
	now := time.Now()
	for i, ago := range []time.Duration{time.Minute, 3 * time.Minute, 2 * time.Minute} {
		_, err := rig.store.Pool().Exec(bg, `UPDATE jobs SET finished_at = $2 WHERE id = $1`, dead[i], now.Add(-ago))
		require.NoError(t, err)
	}
	rowIDs := `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`
	strs := func(ids ...uuid.UUID) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = id.String()
		}
		return out
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, strs(dead[0], dead[2], dead[1]), eval[[]string](t, ctx, rowIDs), "latest failure first")
	require.Equal(t, "Failed, latest first", eval[string](t, ctx, `document.querySelector('[data-testid="dlq-sort"] option:checked').textContent`))
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?sort=oldest"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, strs(dead[1], dead[2], dead[0]), eval[[]string](t, ctx, rowIDs))
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?sort=created"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, strs(dead[2], dead[1], dead[0]), eval[[]string](t, ctx, rowIDs))

	// Sixty more, failed earlier still: two pages; jump to the second.
	params := make([]jobs.EnqueueParams, 60)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "fail", Queue: "pay", MaxRetries: &zero, Payload: []byte(`{"message": "no"}`)}
	}
	res, err := rig.store.Enqueue(bg, params...)
	require.NoError(t, err)
	for i, r := range res {
		waitStatus(t, rig.store, r.Job.ID, jobs.StateDeadLetter)
		_, err := rig.store.Pool().Exec(bg, `UPDATE jobs SET started_at = $2, finished_at = $2 WHERE id = $1`,
			r.Job.ID, now.Add(-time.Hour-time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="page-jump"]`)))
	require.Equal(t, "2", eval[string](t, ctx, `document.querySelector('[data-testid="page-count"]').textContent`))
	require.Len(t, eval[[]string](t, ctx, rowIDs), 50)
	// The jump is a page load: wait for it as one (polling the page
	// while it navigates finds no page to ask). The field is set and the
	// form sent in one step, so no live refill of page 1 comes between.
	loadBy(t, ctx, `(() => { const f = document.querySelector('[data-testid="page-jump"]');
		f.querySelector('[data-testid="page-no"]').value = '2'; f.requestSubmit(); return true; })()`)
	require.Contains(t, eval[string](t, ctx, `location.search`), "page=2")
	waitJS(t, ctx, `document.querySelectorAll('tr[data-job-id]').length === 13`, 20*time.Second)
	got := eval[[]string](t, ctx, rowIDs)
	require.Equal(t, res[47].Job.ID.String(), got[0], "the 51st latest failure opens page 2")
	require.Equal(t, res[59].Job.ID.String(), got[12])
	require.Equal(t, "2", eval[string](t, ctx, `document.querySelector('[data-testid="page-no"]').value`))
	shoot(t, ctx, "dlq-page-2")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq?page=x"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"] [role="alert"]`)))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="jobs-table"] [role="alert"]').textContent`), "give a page number from 1 to")

	// The Jobs list by finish time, earliest first, and by start time.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?queue=pay&sort=finished_oldest"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, res[59].Job.ID.String(), eval[[]string](t, ctx, rowIDs)[0])
	require.Equal(t, "finished_oldest", eval[string](t, ctx, `document.querySelector('[data-testid="jobs-sort"]').value`))
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?queue=pay&sort=started_oldest"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, res[59].Job.ID.String(), eval[[]string](t, ctx, rowIDs)[0], "the first to start")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?queue=pay&sort=started"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	require.Equal(t, dead[2].String(), eval[[]string](t, ctx, rowIDs)[0], "the last to start")
	shoot(t, ctx, "jobs-ordered")
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?sort=size"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"] [role="alert"]`)))
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="jobs-table"] [role="alert"]').textContent`), strconv.Quote("size"))
}

// loadBy runs js, which must return true having started a page load (a
// form sent natively, a link followed), and waits until the new page has
// loaded.
func loadBy(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := chromedp.RunResponse(c, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		ok, err := chromedp.Evaluate[bool](js)(ctx, tg)
		if err == nil && !ok {
			err = errors.New("the script started no page load")
		}
		return chromedp.Void{}, err
	})
	require.NoError(t, err, js)
	require.Equal(t, int64(200), resp.Status, "the page loaded by %s", js)
}

// TestDLQPlacesLateNewsByFailureTime: on the dead-letter queue's first
// page (latest failure first), a job whose news arrives after the page
// was read goes where its failure time sorts: between the jobs that
// failed before and after it, or not onto a full page it sorts past; not
// at the top, as if it had just failed.
func TestDLQPlacesLateNewsByFailureTime(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	zero := 0
	params := make([]jobs.EnqueueParams, 53)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "fail", Queue: "pay", MaxRetries: &zero, Payload: []byte(`{"message": "no"}`)}
	}
	res, err := rig.store.Enqueue(bg, params...)
	require.NoError(t, err)
	now := time.Now()
	// res[i] failed i minutes ago; the last one, hours ago (page 2).
	for i, r := range res {
		waitStatus(t, rig.store, r.Job.ID, jobs.StateDeadLetter)
		ago := time.Duration(i) * time.Minute
		if i == len(res)-1 {
			ago = 3 * time.Hour
		}
		_, err := rig.store.Pool().Exec(bg, `UPDATE jobs SET finished_at = $2 WHERE id = $1`, r.Job.ID, now.Add(-ago))
		require.NoError(t, err)
	}
	rowIDs := `[...document.querySelectorAll('tr[data-job-id]')].map(r => r.dataset.jobId)`
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id]`)))
	waitLive(t, ctx, 10*time.Second)
	want := make([]string, 50)
	for i := range want {
		want[i] = res[i].Job.ID.String()
	}
	require.Equal(t, want, eval[[]string](t, ctx, rowIDs))
	late := func(j *jobs.Job) {
		rig.broker.Deliver([]domain.Event{{JobID: j.ID, Status: jobs.StateDeadLetter, Type: j.Type, Queue: j.Queue, Attempt: 1, At: time.Now()}})
	}

	// The page read before res[3] failed, say: its news puts it between
	// res[2] and res[4].
	require.True(t, eval[bool](t, ctx, `(document.querySelector('tr[data-job-id="`+res[3].Job.ID.String()+`"]').remove(), true)`))
	late(res[3].Job)
	waitJS(t, ctx, `document.querySelectorAll('tr[data-job-id]').length === 50`, 10*time.Second)
	require.Equal(t, want, eval[[]string](t, ctx, rowIDs), "the late job where its failure sorts")

	// News of the job that failed hours ago leaves the full page as it
	// is. The news of res[5] (on the page) after it shows the page has
	// taken both in.
	late(res[len(res)-1].Job)
	_, err = rig.store.Pool().Exec(bg, `UPDATE jobs SET max_retries = 5 WHERE id = $1`, res[5].Job.ID)
	require.NoError(t, err)
	late(res[5].Job)
	waitJS(t, ctx, `document.querySelector('tr[data-job-id="`+res[5].Job.ID.String()+`"] td[data-label="Attempt"]').textContent.trim() === '1/6'`, 10*time.Second)
	require.Equal(t, want, eval[[]string](t, ctx, rowIDs), "a job that sorts onto page 2 stays off page 1")
}
