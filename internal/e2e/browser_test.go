package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// Tests need not spend a tenth of a second per password hash.
func init() { auth.BcryptCost = 4 }

// dashboardRig runs the dashboard, event bus, listener and a worker pool in
// this process against a fresh database, on a real port.
type dashboardRig struct {
	base     string
	store    *db.Store
	registry *jobs.Registry
	broker   *handlers.Broker
	// restart stops the dashboard's HTTP server (closing its connections,
	// live streams included) and serves it again on the same address with
	// sessionKey, as a restart of Flint with another FLINT_SESSION_KEY.
	restart func(t *testing.T, sessionKey []byte)
	// present registers the rig's pool in the worker registry (the
	// Workers page lists it) until the test ends.
	present func()
}

// startDashboard starts the rig on a fresh database; register adds
// handlers of the test's own before the pool starts.
func startDashboard(t *testing.T, register ...func(*jobs.Registry)) *dashboardRig {
	t.Helper()
	store, dbURL := dbtest.NewStore(t)
	return startDashboardOn(t, store, dbURL, register...)
}

// startDashboardOn is startDashboard on the database at dbURL, which store
// is open on.
func startDashboardOn(t *testing.T, store *db.Store, dbURL string, register ...func(*jobs.Registry)) *dashboardRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := store.EnsureUser(ctx, "ops@example.com", "browser-test-pw", "admin")
	require.NoError(t, err)
	broker := handlers.NewBroker(1000)
	bus := db.NewEventBus(store, nil, false, logger, broker.Deliver)
	store.SetEventSink(bus)
	run(bus.Run)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	var flaky atomic.Int32
	reg.Register("flaky", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) {
		if flaky.Add(1) == 1 {
			return nil, fmt.Errorf("first run fails")
		}
		return map[string]bool{"ok": true}, nil
	}))
	for _, r := range register {
		r(reg)
	}
	pool := workers.NewPool(workers.Config{WorkerID: "browser", Workers: 4, PollInterval: 100 * time.Millisecond}, store, reg, logger)
	l := db.NewListener(dbURL, logger, 0)
	l.Handle(db.ChannelEvents, bus.ReceivePostgres)
	l.Handle(db.ChannelJobs, pool.Wake)
	ready := make(chan struct{})
	var once sync.Once
	l.OnConnect(func() { once.Do(func() { close(ready) }) })
	run(l.Run)
	<-ready
	run(pool.Run)
	serve := func(t *testing.T, addr string, key []byte) (string, func()) {
		actx, stopStreams := context.WithCancel(ctx) // a stopped server's streams end with it
		app := handlers.New(handlers.Config{APIKey: "browser-test-api-key", BaseContext: actx, Broker: broker, Dashboard: store,
			Audit: store, Logs: store, Access: store, Alerts: store, AlertTest: notifier(t, nil, nil).SendTest,
			Session: handlers.SessionConfig{Key: key}, Wake: pool.Wake,
			Workers: func(ctx context.Context) ([]domain.WorkerInfo, error) { return store.ListWorkers(ctx, 30*time.Second) }},
			store, reg, logger)
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		go func() { _ = app.Listener(ln) }()
		return ln.Addr().String(), func() { stopStreams(); _ = app.ShutdownWithTimeout(time.Second) }
	}
	addr, stop := serve(t, "127.0.0.1:0", []byte("0123456789abcdef0123456789abcdef"))
	t.Cleanup(func() { stop() })
	rig := &dashboardRig{base: "http://" + addr, store: store, registry: reg, broker: broker}
	rig.present = func() {
		run(workers.NewPresence(domain.WorkerInfo{ID: "browser", Concurrency: 4}, reg, 0, store, nil, logger).Run)
	}
	rig.restart = func(t *testing.T, key []byte) {
		stop()
		_, stop = serve(t, addr, key)
	}
	return rig
}

// browser starts headless Chromium with the flags this environment needs
// and a fresh profile, and accepts every confirmation dialog.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests need Chromium")
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed (scripts/services.sh ensure chromium installs it)")
	}
	dir := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(dir),
		chromedp.Flag("headless", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	require.NoError(t, chromedp.Do(ctx)) // start the browser with no deadline
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx
}

// signIn signs in as the rig's operator and waits for the overview to be
// live.
func signIn(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	within(t, ctx, 30*time.Second,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="login-form"]`)),
		chromedp.SendKeys(chromedp.CSS("#email"), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS("#password"), "browser-test-pw"),
		chromedp.Submit(chromedp.CSS("#password")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="counts"]`)),
	)
	waitLive(t, ctx, 10*time.Second)
}

// waitLive waits for the page's live indicator to say "Live". The tab may
// be between pages meanwhile (a sign-in sends it on): an evaluation cut
// short, or a page without the indicator yet, counts as not yet.
func waitLive(t *testing.T, ctx context.Context, timeout time.Duration) {
	t.Helper()
	const js = `(() => { const l = document.querySelector('[data-live]'); const x = document.querySelector('[data-live] .live-text');
		return !!l && !!x && l.dataset.state === 'open' && x.textContent === 'Live'; })()`
	if pollUntil(timeout, 100*time.Millisecond, func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](js))
		return err == nil && ok
	}) {
		return
	}
	t.Fatalf("the page's live indicator did not say Live within %s", timeout)
}

// within runs browser steps with a deadline.
func within(t *testing.T, ctx context.Context, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	require.NoError(t, chromedp.Do(c, steps...))
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err, js)
	return v
}

// waitJS polls a JavaScript condition until it holds.
func waitJS(t *testing.T, ctx context.Context, js string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "a condition in the page: "+js, func() bool { return eval[bool](t, ctx, js) })
}

// typeInto types text into the field sel once htmx has nothing in flight
// (no request, swap or settle under way), then checks that the field holds
// exactly text: keys sent while a swap was replacing the form were once
// lost, leaving half a name behind. The field is focused from the page and
// the keys go to whatever has the focus: a node id looked up over DevTools
// goes stale when a live swap moves the field (hx-preserve keeps the same
// element, moved), and the lookup then fails though the page is fine.
func typeInto(t *testing.T, ctx context.Context, sel, text string) {
	t.Helper()
	waitJS(t, ctx, `!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')`, 10*time.Second)
	js, err := json.Marshal(sel)
	require.NoError(t, err)
	field := `document.querySelector(` + string(js) + `)`
	require.True(t, eval[bool](t, ctx, `(f => !!f && (f.focus(), document.activeElement === f))(`+field+`)`), "the focus in "+sel)
	within(t, ctx, 10*time.Second, chromedp.KeyEvent(text))
	require.Equal(t, text, eval[string](t, ctx, field+`.value`), "what landed in "+sel)
}

// retype empties the field sel, then types text into it (typeInto).
func retype(t *testing.T, ctx context.Context, sel, text string) {
	t.Helper()
	require.True(t, eval[bool](t, ctx, `(f => !!f && (f.value = '', true))(document.querySelector(`+jsString(sel)+`))`), "no %s to empty", sel)
	typeInto(t, ctx, sel, text)
}

// clickBound clicks the element sel through the DOM once htmx has bound
// the element bound (its form, say): a live update may swap the region
// between finding an element by node id and clicking it, which chromedp
// reports as "Could not find node with given id".
func clickBound(t *testing.T, ctx context.Context, bound, sel string) {
	t.Helper()
	waitJS(t, ctx, `(() => { const f = document.querySelector(`+jsString(bound)+`), b = document.querySelector(`+jsString(sel)+`);
		if (!f || !b || !f['htmx-internal-data']) return false; b.click(); return true; })()`, 10*time.Second)
}

func waitStatus(t *testing.T, s *db.Store, id uuid.UUID, want jobs.State) *jobs.Job {
	t.Helper()
	var j *jobs.Job
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var err error
		j, err = s.GetJob(context.Background(), id)
		require.NoError(t, err)
		return j.Status == want, fmt.Sprintf("job %s to be %s (it is %s)", id, want, j.Status)
	})
	return j
}

// TestDashboardInABrowser drives the dashboard in headless Chromium: sign
// in, create a job through the form, watch its row change state live
// without a reload, replay a job from the DLQ, restore one from the bin,
// and see a state-changing request without the CSRF token refused.
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	// A job of type gate runs until the test lets it finish, so that its
	// row is seen running however slowly the page loads.
	release := make(chan struct{})
	rig := startDashboard(t, func(r *jobs.Registry) {
		r.Register("gate", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
			select {
			case <-release:
				return nil, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}))
	})
	ctx := browser(t)
	base := rig.base

	signIn(t, ctx, base)

	// Create a job through the form: first with a mistake, shown inline.
	within(t, ctx, 30*time.Second,
		chromedp.Navigate(base+"/jobs/new"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="create-form"]`)),
	)
	eval[bool](t, ctx, `document.querySelector('#f-type').value = 'sleep'; document.querySelector('#f-payload').value = '{"ms": "soon"}'; true`)
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="create-submit"]`)))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="error-payload"]')`, 10*time.Second)
	eval[bool](t, ctx, `document.querySelector('#f-type').value = 'gate'; document.querySelector('#f-payload').value = '{}'; true`)
	within(t, ctx, 10*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="create-submit"]`)))
	waitJS(t, ctx, `!!document.querySelector('[data-testid="job-id"]')`, 10*time.Second)
	id := uuid.MustParse(eval[string](t, ctx, `document.querySelector('[data-testid="job-id"]').textContent.trim()`))

	// Its row changes state live, with no reload.
	within(t, ctx, 30*time.Second, chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)))
	eval[bool](t, ctx, `window.__noReload = true; true`)
	first := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('tr[data-job-id="%s"]').dataset.status`, id))
	require.NotEqual(t, "completed", first, "the row starts before completion")
	close(release)
	waitJS(t, ctx, fmt.Sprintf(`(document.querySelector('tr[data-job-id="%s"]')||{dataset:{}}).dataset.status === 'completed'`, id), 30*time.Second)
	require.True(t, eval[bool](t, ctx, `window.__noReload === true`), "the page was not reloaded")

	// Replay from the DLQ.
	zero := 0
	res, err := rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "flaky", MaxRetries: &zero})
	require.NoError(t, err)
	dead := res[0].Job.ID
	waitStatus(t, rig.store, dead, jobs.StateDeadLetter)
	within(t, ctx, 30*time.Second, chromedp.Navigate(base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sel-%s`, dead))),
		chromedp.Click(chromedp.CSS(`[data-testid="replay-selected"]`)))
	waitStatus(t, rig.store, dead, jobs.StateCompleted)
	waitJS(t, ctx, `[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Retried: 1 of 1'))`, 10*time.Second)

	// Restore from the bin.
	later := time.Now().Add(time.Hour)
	res, err = rig.store.Enqueue(context.Background(), jobs.EnqueueParams{Type: "noop", RunAt: &later})
	require.NoError(t, err)
	binned := res[0].Job.ID
	_, err = rig.store.DeleteJob(context.Background(), binned)
	require.NoError(t, err)
	within(t, ctx, 30*time.Second, chromedp.Navigate(base+"/bin"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="jobs-table"]`)),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#sel-%s`, binned))),
		chromedp.Click(chromedp.CSS(`[data-testid="restore-selected"]`)))
	waitFor(t, 20*time.Second, "the job to be restored", func() bool {
		j, err := rig.store.GetJob(context.Background(), binned)
		require.NoError(t, err)
		return j.DeletedAt == nil
	})

	// A state-changing request without the CSRF token is refused.
	status := eval[int](t, ctx, fmt.Sprintf(`fetch('/jobs/%s/delete', {method: 'POST'}).then(r => r.status)`, binned))
	require.Equal(t, 403, status)
	j, err := rig.store.GetJob(context.Background(), binned)
	require.NoError(t, err)
	require.Nil(t, j.DeletedAt, "the refused request changed nothing")
	// The same request with the page's token goes through.
	status = eval[int](t, ctx, fmt.Sprintf(`fetch('/jobs/%s/delete', {method: 'POST', headers: {'X-CSRF-Token': JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']}}).then(r => r.status)`, binned))
	require.Equal(t, 200, status)
}
