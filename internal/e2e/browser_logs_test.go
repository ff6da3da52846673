package e2e

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/logs"
)

// shipLogs returns a logger of process p that stores its entries in the
// rig's database, as a separate Flint process would.
func shipLogs(t *testing.T, rig *dashboardRig, p logs.Process) *logs.Logger {
	t.Helper()
	lg, err := logs.New(logs.Config{Stdout: io.Discard})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lg.Ship(ctx, rig.store, logs.ShipConfig{Process: p, Interval: 50 * time.Millisecond})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return lg
}

// logsReport describes the Logs page as the operator sees it: the table's
// columns, each row's cells (time, level, process, component, message) and
// the process filter's choices.
const logsReport = `(() => {
  const table = document.querySelector('[data-testid="log-table"] table');
  const rows = [...table.querySelectorAll('tbody tr[data-testid="log-row"]')].map(r => {
    const c = r.querySelectorAll(':scope > td');
    return {cells: c.length, time: c[0].textContent.trim(), level: c[1].textContent.trim(),
      process: c[2].querySelector('a').textContent.trim(), role: c[2].querySelector('span') ? c[2].querySelector('span').textContent.trim() : '',
      component: c[3].textContent.trim(), message: c[4].firstChild.textContent.trim(),
      error: c[4].querySelector('div') ? c[4].querySelector('div').textContent.trim() : ''};
  });
  return {
    columns: [...table.querySelectorAll('thead th')].map(th => th.textContent.trim()),
    rows,
    choices: [...document.querySelectorAll('[data-testid="log-process"] option')].map(o => o.value),
    live: document.querySelector('[data-testid="log-table"]').hasAttribute('data-live-logs'),
  };
})()`

type logsShape struct {
	Columns []string `json:"columns"`
	Rows    []struct {
		Cells     int    `json:"cells"`
		Time      string `json:"time"`
		Level     string `json:"level"`
		Process   string `json:"process"`
		Role      string `json:"role"`
		Component string `json:"component"`
		Message   string `json:"message"`
		Error     string `json:"error"`
	} `json:"rows"`
	Choices []string `json:"choices"`
	Live    bool     `json:"live"`
}

// TestLogsPageShowsEveryProcess: the Logs page shows the entries of two
// processes, each row naming its process; choosing one process narrows
// the table to its entries, and its new entries arrive live while the
// other's stay out. FLINT_SCREENSHOTS=dir saves the page at 1400 and
// 375 px.
func TestLogsPageShowsEveryProcess(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	api := shipLogs(t, rig, logs.Process{ID: "api-7f3c-1201-a1b2c3", Host: "api-7f3c", Role: "api"})
	worker := shipLogs(t, rig, logs.Process{ID: "worker-eu-1", Host: "node-12", Role: "worker"})
	api.Slog().Info("listening", "component", "http", "url", "http://localhost:8080")
	worker.Slog().Info("pool started", "component", "worker", "workers", 8, "queues", "default,mail")
	api.Slog().Warn("request failed", "component", "http", "path", "/api/v1/jobs", "status", 503, "error", "database is restarting")
	worker.Slog().Warn("job failed; will retry", "component", "worker", "job_id", "0193a1f0-8d2c-7b3e-9f00-5e1c2d3a4b5c",
		"type", "send_email", "attempt", 2, "error", "dial tcp 10.0.0.7:25: connection refused", "smtp_password", "hunter2")
	worker.Slog().Info("batch written", "component", "worker", "rows", 500, "table", "events")
	api.Slog().Error("panic in request", "component", "http", "path", "/jobs/x", "error", "runtime error: index out of range")

	require.Eventually(t, func() bool {
		es, _, err := rig.store.ReadLogs(context.Background(), logs.Query{})
		return err == nil && len(es) == 6
	}, 20*time.Second, 20*time.Millisecond, "both processes' entries are stored")

	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/logs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="log-table"]`)))
	waitLive(t, ctx, 10*time.Second)
	s := eval[logsShape](t, ctx, logsReport)
	require.Equal(t, []string{"Time", "Level", "Process", "Component", "Message", "Details"}, s.Columns)
	require.Len(t, s.Rows, 6)
	byProcess := map[string][]string{}
	for _, r := range s.Rows {
		require.Equal(t, 6, r.Cells)
		require.Regexp(t, `^\d\d:\d\d:\d\d\.\d{3}$`, r.Time)
		require.Contains(t, []string{"INFO", "WARN", "ERROR"}, r.Level)
		byProcess[r.Process+"/"+r.Role] = append(byProcess[r.Process+"/"+r.Role], r.Message)
	}
	require.Equal(t, "panic in request", s.Rows[0].Message, "newest first")
	require.Equal(t, "runtime error: index out of range", s.Rows[0].Error, "the error under the message")
	require.Len(t, byProcess["worker-eu-1/worker"], 3)
	require.Len(t, byProcess["api-7f3c-1201-a1b2c3/api"], 3)
	require.Len(t, s.Choices, 3)
	require.Equal(t, "", s.Choices[0], "all processes")
	require.ElementsMatch(t, []string{"api-7f3c-1201-a1b2c3", "worker-eu-1"}, s.Choices[1:])
	require.NotContains(t, eval[string](t, ctx, `document.querySelector('[data-testid="log-table"]').textContent`), "hunter2")
	require.Equal(t, 0, eval[int](t, ctx, `[...document.querySelectorAll('td[data-label="Details"]')].filter(td =>
		td.scrollWidth > td.clientWidth + 1 || getComputedStyle(td).textOverflow === 'ellipsis').length`), "no Details cell is cut at 1400 px")
	shoot(t, ctx, "logs-two-processes")

	// One process: the table narrows to its rows, and the address says so.
	eval[bool](t, ctx, `(() => { const s = document.querySelector('[data-testid="log-process"]'); s.value = 'worker-eu-1';
		return s.dispatchEvent(new Event('change', {bubbles: true})) })()`)
	waitJS(t, ctx, `location.search.includes('process=worker-eu-1') && document.querySelectorAll('[data-testid="log-row"]').length === 3`, 10*time.Second)
	s = eval[logsShape](t, ctx, logsReport)
	require.Len(t, s.Rows, 3)
	for _, r := range s.Rows {
		require.Equal(t, 6, r.Cells)
		require.Equal(t, "worker-eu-1", r.Process)
		require.Equal(t, "worker", r.Role)
		require.Equal(t, "worker", r.Component)
	}
	require.Equal(t, []string{"batch written", "job failed; will retry", "pool started"},
		[]string{s.Rows[0].Message, s.Rows[1].Message, s.Rows[2].Message})
	require.Equal(t, "dial tcp 10.0.0.7:25: connection refused", s.Rows[1].Error)
	require.True(t, s.Live)

	// Live: the worker's new entry comes to the top; the API's does not.
	// The tail shows an entry once no transaction on the server is older
	// than it or, at the latest, 30 s after it was stored (another test
	// holding a transaction open keeps it back that long), then the next
	// poll brings it.
	api.Slog().Info("api entry while filtered", "component", "http")
	worker.Slog().Info("worker entry while filtered", "component", "worker")
	waitJS(t, ctx, `document.querySelector('[data-testid="log-row"] td:nth-child(5)').textContent.trim() === 'worker entry while filtered'`, 40*time.Second)
	s = eval[logsShape](t, ctx, logsReport)
	require.Len(t, s.Rows, 4)
	for _, r := range s.Rows {
		require.Equal(t, "worker-eu-1", r.Process)
		require.Equal(t, 6, r.Cells)
	}
	shoot(t, ctx, "logs-one-process")
}
