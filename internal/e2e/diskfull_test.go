package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// TestDatabaseDiskFull runs a real `flint serve` over a database whose
// files live on a small filesystem (a tmpfs tablespace), fills that disk
// under enqueues, and frees it: while it is full the API answers 503
// database_disk_full with Retry-After (never 500) and the dashboard shows a
// banner naming the cause; once space is freed enqueues succeed again
// without a restart, the banner goes, and every job answered 201 completes,
// none twice.
func TestDatabaseDiskFull(t *testing.T) {
	t.Parallel()
	u, disk := dbtest.NewDatabaseOnSmallDisk(t, 24)
	addr := freeAddr(t)
	srv := startFlint(t, "serve", u, "FLINT_ADDR="+addr,
		"FLINT_ADMIN_EMAIL=ops@example.com", "FLINT_ADMIN_PASSWORD=browser-test-pw")
	base := "http://" + addr
	newAPIClient(base).waitReady(t, 60*time.Second)
	ctx := browser(t)
	signIn(t, ctx, base)

	var acked []uuid.UUID
	post := func() (int, string, string) {
		client := &http.Client{Timeout: 30 * time.Second}
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewBufferString(`{"type":"noop"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body struct {
			ID    uuid.UUID `json:"id"`
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		if resp.StatusCode == http.StatusCreated {
			acked = append(acked, body.ID)
		}
		return resp.StatusCode, body.Error.Code, resp.Header.Get("Retry-After")
	}
	require.Equal(t, http.StatusCreated, first(post()))

	require.NoError(t, disk.Fill())
	var code int
	var errCode, retry string
	waitFor(t, 60*time.Second, "an enqueue refused for want of space", func() bool {
		code, errCode, retry = post()
		require.NotEqual(t, http.StatusInternalServerError, code)
		return code == http.StatusServiceUnavailable
	})
	require.Equal(t, "database_disk_full", errCode)
	require.Equal(t, "30", retry)

	within(t, ctx, 30*time.Second,
		chromedp.Navigate(base+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="db-banner"][data-cause="disk-full"]`)),
	)
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="db-banner"]').textContent`), "disk is full")

	require.NoError(t, disk.Free())
	freed := time.Now()
	waitFor(t, 30*time.Second, "an enqueue accepted once space is freed", func() bool {
		code, _, _ := post()
		return code == http.StatusCreated
	})
	t.Logf("enqueues accepted again %s after space was freed", time.Since(freed).Round(time.Millisecond))
	waitFor(t, 60*time.Second, "the banner to go", func() bool {
		within(t, ctx, 30*time.Second, chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="filters"]`)))
		return eval[bool](t, ctx, bannerGone)
	})
	s := openStore(t, u)
	waitFor(t, 60*time.Second, "every acknowledged job to complete", func() bool {
		var done int
		require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM `+everyJobSQL+` j
			WHERE id = ANY($1) AND status = 'completed'`, acked).Scan(&done))
		return done == len(acked)
	})
	requireNoneDoubled(t, s)
	select {
	case <-srv.done:
		t.Fatalf("flint serve exited: %v", srv.err)
	default:
	}
}

func first(code int, _, _ string) int { return code }

// TestLogFileDiskFull runs a worker whose log file cannot be written (its
// disk is full: /dev/full): it runs its jobs all the same and says once on
// stderr that the log file is not being written.
func TestLogFileDiskFull(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "flint.log")
	require.NoError(t, os.Symlink("/dev/full", logFile))
	w := startFlint(t, "worker", u, "FLINT_LOG_FILE="+logFile)
	js := enqueueAll(t, s, sleepJob(10), sleepJob(10), sleepJob(10))
	waitJobs(t, s, js, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	waitFor(t, 10*time.Second, "the worker to say the log file is not written", func() bool {
		return strings.Contains(w.out.String(), "cannot write the log file")
	})
	require.Equal(t, 1, strings.Count(w.out.String(), "cannot write the log file"), "said once")
}
