package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// TestRemoteWorkAndPushInABrowser drives a real `flint serve` with a
// remote worker holding leases and a push queue delivering to an endpoint:
// the Workers page shows the remote worker's language, version, types and
// leases and quiets it, the queue page shows its push target and the
// delivery outcomes, with new ones arriving live.
//
//flint:long a browser scenario: one operator's session, step after step, reads best top to bottom
func TestRemoteWorkAndPushInABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)

	// The push endpoint: "ok" jobs succeed, anything else fails for good.
	var pushed atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pushed.Add(1)
		if r.Header.Get("Flint-Type") != "ok" {
			w.Header().Set("Flint-No-Retry", "true")
			http.Error(w, "cannot do that", http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"done": true}`))
	}))
	t.Cleanup(receiver.Close)

	addr := freeAddr(t)
	startFlint(t, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr,
		"FLINT_ADMIN_EMAIL=ops@example.com", "FLINT_ADMIN_PASSWORD=browser-test-pw",
		"FLINT_HTTP_ALLOW="+strings.TrimPrefix(receiver.URL, "http://"))
	base := "http://" + addr
	api := newAPIClient(base)
	api.waitReady(t, 60*time.Second)

	// A remote worker that holds two leases, heartbeating as it should.
	var reg struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/workers", map[string]any{
		"name": "thumbnailer", "types": []string{"resize"}, "queues": []string{"images"},
		"concurrency": 4, "language": "python", "version": "1.4.2",
	}, &reg))
	for range 2 {
		require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs",
			`{"type": "resize", "queue": "images", "payload": {"w": 64}}`, nil))
	}
	var claimed struct {
		Jobs []struct {
			ID         string `json:"id"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	require.Eventually(t, func() bool {
		claimed.Jobs = nil
		api.do(t, http.MethodPost, "/api/v1/workers/"+reg.ID+"/claim", `{"max": 2, "wait_seconds": 1}`, &claimed)
		return len(claimed.Jobs) == 2
	}, 20*time.Second, 10*time.Millisecond)
	leases := make([]map[string]any, len(claimed.Jobs))
	for i, j := range claimed.Jobs {
		leases[i] = map[string]any{"job_id": j.ID, "lease_token": j.LeaseToken, "progress": 40}
	}
	var state atomic.Value
	state.Store("")
	beatCtx, stopBeats := context.WithCancel(context.Background())
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		for beatCtx.Err() == nil {
			var hb struct {
				State string `json:"state"`
			}
			if api.do(t, http.MethodPost, "/api/v1/workers/"+reg.ID+"/heartbeat", map[string]any{"leases": leases}, &hb) == http.StatusOK {
				state.Store(hb.State)
			}
			select {
			case <-beatCtx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stopBeats(); <-beats })

	signIn(t, ctx, base)
	within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/workers"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="worker-row"][data-kind="remote"]`)))
	type workerRow struct {
		Name, Kind, Version, Types, Busy, State string
		Leases                                  []string
		Quiet                                   bool
	}
	rowJS := `(() => {
		const r = document.querySelector('[data-testid="worker-row"][data-kind="remote"]');
		const text = (s) => (r.querySelector('[data-testid="' + s + '"]') || {textContent: ''}).textContent.trim();
		return {Name: text('worker-name'), Kind: text('worker-kind'), Version: text('worker-version'),
			Types: text('worker-types'), Busy: text('worker-busy'), State: text('worker-state'),
			Leases: [...r.querySelectorAll('[data-testid="worker-leases"] a')].map(a => a.getAttribute('href')),
			Quiet: !!r.querySelector('[data-testid="worker-quiet"]')};
	})()`
	row := eval[workerRow](t, ctx, rowJS)
	require.Equal(t, "thumbnailer", row.Name)
	require.Equal(t, "remote · python", row.Kind)
	require.Equal(t, "v1.4.2", row.Version)
	require.Equal(t, "resize", row.Types)
	require.Equal(t, "2 / 4", row.Busy)
	require.ElementsMatch(t, []string{"/jobs/" + claimed.Jobs[0].ID, "/jobs/" + claimed.Jobs[1].ID}, row.Leases)
	require.True(t, row.Quiet)
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('[data-testid="worker-row"]:not([data-kind="remote"])').length`),
		"the serve process's own pool is listed beside the remote worker")
	shoot(t, ctx, "workers-remote")

	// Quiet it: the row says so and the worker hears it on its next heartbeat.
	click(t, ctx, `[data-testid="worker-row"][data-kind="remote"] [data-testid="worker-quiet"]`)
	waitJS(t, ctx, `(() => { const r = document.querySelector('[data-testid="worker-row"][data-kind="remote"]');
		return !!r && (r.querySelector('[data-testid="worker-state"]') || {}).textContent === 'quiet' && !r.querySelector('[data-testid="worker-quiet"]'); })()`,
		10*time.Second)
	require.Eventually(t, func() bool { return state.Load() == "quiet" }, 10*time.Second, 50*time.Millisecond)

	// A push queue: three jobs delivered, one refused for good.
	var patched map[string]any
	require.Equal(t, http.StatusOK, api.do(t, http.MethodPatch, "/api/v1/queues/hooks",
		map[string]any{"push": map[string]any{"url": receiver.URL + "/flint", "timeout_seconds": 10}}, &patched))
	for _, typ := range []string{"ok", "ok", "ok", "nope"} {
		require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs",
			fmt.Sprintf(`{"type": %q, "queue": "hooks", "max_retries": 0}`, typ), nil))
	}
	require.Eventually(t, func() bool { return pushed.Load() == 4 }, 20*time.Second, 20*time.Millisecond)

	within(t, ctx, 20*time.Second, chromedp.Navigate(base+"/queues"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="queue-push"]`)))
	// The queue's name links to its page (clicked from script: the list
	// may be swapped live under a pointer click).
	require.True(t, eval[bool](t, ctx, `(() => { document.querySelector('a[href="/queues/hooks"]').click(); return true; })()`))
	within(t, ctx, 20*time.Second, chromedp.WaitVisible(chromedp.CSS(`[data-testid="queue-push-target"]`)))
	waitLive(t, ctx, 10*time.Second)
	outcomes := `[...document.querySelectorAll('[data-testid="push-deliveries"] [data-testid="push-delivery"]')].map(r => r.dataset.outcome).sort().join(',')`
	waitJS(t, ctx, outcomes+` === 'completed,completed,completed,failed'`, 10*time.Second)
	require.Equal(t, receiver.URL+"/flint", eval[string](t, ctx, `document.querySelector('[data-testid="push-url"]').textContent.trim()`))
	shoot(t, ctx, "queue-push")

	// One more job: its delivery appears without a reload.
	require.True(t, eval[bool](t, ctx, `window.__sameDocument = true`))
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "ok", "queue": "hooks"}`, nil))
	waitJS(t, ctx, outcomes+` === 'completed,completed,completed,completed,failed'`, 15*time.Second)
	require.True(t, eval[bool](t, ctx, `window.__sameDocument === true`), "the page reloaded instead of updating live")
}
