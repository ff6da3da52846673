package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestBusyNeverExceedsCapacity: a pool of 4 workers that has learnt its
// handlers are quick claims ahead into its buffer when a burst of slower
// jobs arrives. Those jobs are claimed, not running: the workers page, the
// overview, GET /api/v1/stats and the running jobs list never count more
// than 4 running, while the work gets done.
func TestBusyNeverExceedsCapacity(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	rig.present()
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	bg := context.Background()
	var warm []jobs.EnqueueParams
	for range 60 {
		warm = append(warm, jobs.EnqueueParams{Type: jobs.TypeNoop})
	}
	res, err := rig.store.Enqueue(bg, warm...)
	require.NoError(t, err)
	waitStatus(t, rig.store, res[len(res)-1].Job.ID, jobs.StateCompleted)

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/workers"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="worker-busy"]`)))
	waitLive(t, ctx, 15*time.Second)
	var burst []jobs.EnqueueParams
	for range 40 {
		burst = append(burst, jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: json.RawMessage(`{"ms": 400}`)})
	}
	res, err = rig.store.Enqueue(bg, burst...)
	require.NoError(t, err)

	busy := `document.querySelector('[data-testid="worker-busy"]').textContent.replace(/\s+/g, '')`
	// Busy reads as one figure: it does not break in a narrow column, as
	// "20 /" over "20" did beside a long list of leases (a pool of 200
	// here, wider than the column's head).
	require.True(t, eval[bool](t, ctx, `(() => { const b = document.querySelector('[data-testid="worker-busy"]'), text = b.textContent;
		b.textContent = '200 / 200'; const td = b.closest('td'); td.style.width = '1px';
		const lines = new Set([...b.getClientRects()].map(r => Math.round(r.top))).size;
		b.textContent = text; td.style.width = ''; return lines === 1 })()`), "Busy broken over lines")
	maxPage, maxAPI, maxList := 0, 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		b := eval[string](t, ctx, busy)
		n, err := strconv.Atoi(strings.TrimSuffix(b, "/4"))
		require.NoError(t, err, b)
		maxPage = max(maxPage, n)
		maxAPI = max(maxAPI, int(runningFromStats(t, rig.base)))
		page, err := rig.store.ListJobs(bg, domain.ListParams{Statuses: []jobs.State{jobs.StateRunning}, Limit: 100})
		require.NoError(t, err)
		maxList = max(maxList, len(page.Jobs))
		j, err := rig.store.GetJob(bg, res[len(res)-1].Job.ID)
		require.NoError(t, err)
		if j.Status == jobs.StateCompleted || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // sampling the counts while the burst drains, until it has
	}
	t.Logf("most running seen: workers page %d, stats %d, running list %d", maxPage, maxAPI, maxList)
	require.LessOrEqual(t, maxPage, 4, "Busy on the workers page")
	require.LessOrEqual(t, maxAPI, 4, "running in GET /api/v1/stats")
	require.LessOrEqual(t, maxList, 4, "the running jobs list")
	require.Equal(t, 4, maxAPI, "the four workers were all busy at some point")
	for _, r := range res {
		waitStatus(t, rig.store, r.Job.ID, jobs.StateCompleted)
	}

	// The overview counts running jobs within capacity too, and a finished
	// job shows how long it waited beside how long it took.
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs?type=sleep"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-waited"]`)))
	took := eval[[]string](t, ctx, `[...document.querySelectorAll('td[data-testid="job-took"]')].map(td => td.innerText.replace(/\s+/g, ' ').trim())`)
	require.NotEmpty(t, took)
	for _, s := range took {
		require.Regexp(t, `^\d{3} ms waited (\d+ ms|\d+\.\ds)$`, s, "took counts the 400 ms handler, not the wait")
	}
	shoot(t, ctx, "jobs-took-waited")
}

// runningFromStats reads by_status.running from GET /api/v1/stats.
func runningFromStats(t *testing.T, base string) int64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/stats", nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "browser-test-api-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st struct {
		ByStatus map[string]int64 `json:"by_status"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st.ByStatus["running"]
}
