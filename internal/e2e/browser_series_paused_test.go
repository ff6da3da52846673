package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// tickScheduler releases due occurrences and gives each series its next
// one every 100 ms, as a scheduler process does, until the test ends.
func tickScheduler(t *testing.T, rig *dashboardRig) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			_, _ = rig.store.PromoteDue(ctx, nil, 100)
			_, _ = rig.store.EnsureNextOccurrences(ctx, 100)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// apiGet reads a JSON answer of the rig's API.
func apiGet[T any](t *testing.T, rig *dashboardRig, path string) T {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rig.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "browser-test-api-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
	var out T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

type seriesShape struct {
	Paused      bool       `json:"paused"`
	QueuePaused bool       `json:"queue_paused"`
	Waiting     int64      `json:"occurrences_waiting"`
	LastRunAt   *time.Time `json:"last_run_at"`
}

// TestPausedQueueSeriesInABrowser: a recurring series on a paused queue
// says so (list, API, explain) while its occurrences pile up unrun, and
// shows no "last run" until one ran; after the series is paused and
// resumed and the queue resumed, its last run is the start of an
// occurrence that ran, never the time of one that was cancelled.
func TestPausedQueueSeriesInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	bg := context.Background()
	_, err := rig.store.UpdateQueue(bg, "reports", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = true; return q })
	require.NoError(t, err)
	res, err := rig.store.Enqueue(bg, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "reports", IntervalSeconds: 1})
	require.NoError(t, err)
	series := *res[0].Job.ScheduleID
	tickScheduler(t, rig)
	queued := func() int {
		var n int
		require.NoError(t, rig.store.Pool().QueryRow(bg, `SELECT count(*) FROM jobs WHERE schedule_id = $1 AND status = 'queued'`, series).Scan(&n))
		return n
	}
	waitFor(t, 20*time.Second, "three occurrences waiting in the paused queue", func() bool { return queued() >= 3 })

	// The API and explain say why nothing runs.
	s := apiGet[seriesShape](t, rig, "/api/v1/recurring/"+series.String())
	require.True(t, s.QueuePaused)
	require.False(t, s.Paused)
	require.GreaterOrEqual(t, s.Waiting, int64(3))
	require.Nil(t, s.LastRunAt, "nothing ran: no last run")
	var first uuid.UUID
	require.NoError(t, rig.store.Pool().QueryRow(bg, `SELECT id FROM jobs WHERE schedule_id = $1 AND status = 'queued' ORDER BY scheduled_for LIMIT 1`, series).Scan(&first))
	ex := apiGet[domain.Explanation](t, rig, "/api/v1/jobs/"+first.String()+"/explain")
	codes := []string{}
	for _, r := range ex.Reasons {
		codes = append(codes, r.Code)
	}
	require.Contains(t, codes, "queue_paused")
	require.Contains(t, codes, "series_queue_paused")

	// The list says so.
	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/recurring"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="series-row"]`)))
	require.True(t, eval[bool](t, ctx, `!!document.querySelector('[data-testid="series-state"] [data-testid="series-queue-paused"]')`))
	require.Regexp(t, `^\d+ occurrences wait unrun; resume queue reports$`,
		eval[string](t, ctx, `document.querySelector('[data-testid="series-waiting"]').textContent.trim().replace(/\s+/g, ' ')`))
	require.Equal(t, "never", eval[string](t, ctx, `document.querySelector('[data-testid="series-last-run"]').textContent.trim()`))
	shoot(t, ctx, "recurring-queue-paused")

	// Pause the series (its pending occurrence is cancelled), resume it and
	// the queue: the waiting occurrences run.
	_, _, err = rig.store.PauseSchedule(bg, series)
	require.NoError(t, err)
	_, err = rig.store.ResumeSchedule(bg, series)
	require.NoError(t, err)
	_, err = rig.store.UpdateQueue(bg, "reports", "test", func(q domain.QueueSettings) domain.QueueSettings { q.Paused = false; return q })
	require.NoError(t, err)
	waitFor(t, 20*time.Second, "the waiting occurrences to run", func() bool {
		s = apiGet[seriesShape](t, rig, "/api/v1/recurring/"+series.String())
		return queued() == 0 && s.LastRunAt != nil
	})
	require.False(t, s.QueuePaused)
	require.NotNil(t, s.LastRunAt)
	var ranAt int
	require.NoError(t, rig.store.Pool().QueryRow(bg, `SELECT count(*) FROM jobs WHERE schedule_id = $1 AND started_at = $2`, series, *s.LastRunAt).Scan(&ranAt))
	require.Equal(t, 1, ranAt, "the last run is the start of an occurrence that ran")
	require.False(t, s.LastRunAt.After(time.Now()), "the last run is not in the future")
	waitJS(t, ctx, `document.querySelector('[data-testid="series-last-run"]').textContent.trim() !== 'never' && !document.querySelector('[data-testid="series-queue-paused"]')`, 15*time.Second)
}
