package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestLimitEditorChangedElsewhere: a queue's limits editor, open and half
// typed in one tab, stays as the operator left it while live updates
// change the counts beside it (the table keeps updating, and nothing
// says "Changed elsewhere", since nothing was); when the limits are
// saved from another tab or over the API, the editor says so, keeps what
// was typed, and loads the current values when asked.
//
//flint:long a browser scenario: two operators on one queue, step after step, reads best top to bottom
func TestLimitEditorChangedElsewhere(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	root := browser(t)
	signIn(t, root, rig.base)
	bg := context.Background()
	// A paused queue: what is enqueued into it waits, counted.
	_, err := rig.store.UpdateQueue(bg, "mail", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	require.NoError(t, err)
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"})
	require.NoError(t, err)
	open := func() context.Context {
		tab, cancel := chromedp.NewContext(root)
		t.Cleanup(cancel)
		require.NoError(t, chromedp.Do(tab))
		within(t, tab, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/queues"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="mail"]`)))
		waitLive(t, tab, 10*time.Second)
		return tab
	}
	editing, other := open(), open()
	row := `document.querySelector('tr[data-queue="mail"]')`
	field := row + `.querySelector('input[name="concurrency"]')`
	cell := func(tab context.Context, id string) string {
		return eval[string](t, tab, row+`.querySelector('[data-testid="`+id+`"]').textContent.trim().replace(/\s+/g, ' ')`)
	}
	stale := `!!document.querySelector('#queues-live [data-stale]')`

	// One operator opens the editor and starts typing.
	htmxReady(t, editing, "mail")
	click(t, editing, `tr[data-queue="mail"] details summary`)
	typeInto(t, editing, `tr[data-queue="mail"] input[name="concurrency"]`, "3")
	require.True(t, eval[bool](t, editing, `(window.__tableBefore = document.querySelector('#queues-live'), true)`))

	// Jobs arrive: the counts follow, the form does not move, nothing is
	// said to have changed.
	for _, want := range []string{"3", "5"} {
		_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"}, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail"})
		require.NoError(t, err)
		waitJS(t, editing, row+`.querySelector('[data-testid="queue-queued"]').textContent.trim() === `+jsString(want), 10*time.Second)
		require.False(t, eval[bool](t, editing, stale), "a false \"Changed elsewhere\" after the counts changed")
		require.Equal(t, "3", eval[string](t, editing, field+`.value`), "what was typed")
		require.True(t, eval[bool](t, editing, row+`.querySelector('details').open`))
		require.True(t, eval[bool](t, editing, `document.activeElement === `+field), "the focus stays in the field")
	}
	require.False(t, eval[bool](t, editing, `document.querySelector('#queues-live') === window.__tableBefore`), "the table was swapped live")
	shoot(t, editing, "limits-editing-live")

	// Another operator resumes the queue (its settings, not its limits):
	// still nothing to say.
	htmxReady(t, other, "mail")
	click(t, other, `tr[data-queue="mail"] [data-testid="queue-resume"]`)
	waitJS(t, editing, row+`.querySelector('[data-testid="queue-state"]').textContent.includes('active')`, 10*time.Second)
	waitJS(t, editing, row+`.querySelector('[data-testid="queue-queued"]').textContent.trim() === '0'`, 15*time.Second)
	require.False(t, eval[bool](t, editing, stale), "a false \"Changed elsewhere\" after a resume")
	require.Equal(t, "3", eval[string](t, editing, field+`.value`))

	// ... and saves a limit in its own editor: now the first is told.
	htmxReady(t, other, "mail")
	require.True(t, eval[bool](t, other, `(() => { const r = `+row+`; r.querySelector('details').open = true;
		r.querySelector('input[name="concurrency"]').value = '5'; r.querySelector('[data-testid="queue-save"]').click(); return true })()`))
	waitJS(t, other, row+`.querySelector('[data-testid="queue-limits"]').textContent.includes('5 at once')`, 10*time.Second)
	waitJS(t, editing, stale, 10*time.Second)
	require.Equal(t, "3", eval[string](t, editing, field+`.value`), "the edit in progress is kept")
	require.Equal(t, "5 at once", cell(editing, "queue-limits"), "the table around the form shows the new limit")
	require.Equal(t, 1, eval[int](t, editing, `document.querySelectorAll('[data-stale]').length`))
	shoot(t, editing, "limits-changed-elsewhere")
	click(t, editing, `#queues-live [data-stale] button`)
	waitJS(t, editing, `!`+stale+` && `+field+`.value === '5'`, 10*time.Second)
	require.True(t, eval[bool](t, editing, row+`.querySelector('details').open`), "the editor stays open with the current values")

	// Open, nothing typed, and changed over the API: told as well.
	req, err := http.NewRequest(http.MethodPatch, rig.base+"/api/v1/queues/mail", strings.NewReader(`{"concurrency": 7}`))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "browser-test-api-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	waitJS(t, editing, stale, 10*time.Second)
	require.Equal(t, "7 at once", cell(editing, "queue-limits"))
	require.Equal(t, "5", eval[string](t, editing, field+`.value`), "the form still shows what it was opened on")
	click(t, editing, `#queues-live [data-stale] button`)
	waitJS(t, editing, `!`+stale+` && `+field+`.value === '7'`, 10*time.Second)

	// No live update of the counts brings the notice back.
	_, err = rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "mail", RunAt: ptrTo(time.Now().Add(time.Hour))},
		jobs.EnqueueParams{Type: jobs.TypeSleep, Queue: "mail", Payload: []byte(`{"ms": 5000}`)})
	require.NoError(t, err)
	waitJS(t, editing, row+`.querySelector('[data-testid="queue-running"]').textContent.trim() === '1'`, 15*time.Second)
	require.False(t, eval[bool](t, editing, stale))
	require.True(t, eval[bool](t, editing, row+`.querySelector('details').open`))
}
