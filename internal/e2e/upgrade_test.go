//go:build chaos

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// upgradeFrom is the older Flint this test upgrades from: the previous
// release, v0.1.0 (by commit, so that a clone without tags builds it
// too), whose schema the later migrations extend. Move it to each new
// release once cut.
const (
	upgradeFrom        = "32a49d6"
	upgradeFromVersion = "v0.1.0"
)

// TestRollingUpgrade builds the older Flint from the repository's history,
// runs its API, scheduler and two workers on a database it migrates
// itself, and under a steady stream of enqueues: migrates with this
// version's `flint migrate`, then replaces the processes one at a time
// (worker, API, scheduler, worker) with this version's. Every enqueue
// answered 201 completes exactly once, nothing is left running, workers of
// both versions ran jobs, and the registry showed both versions at once.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	oldBin := buildOldFlint(t, upgradeFrom, upgradeFromVersion)
	newBin := buildFlint(t, false)
	u := emptyDatabase(t)
	oldAPIAddr, newAPIAddr := freeAddr(t), freeAddr(t)

	oldAPI := startBinary(t, oldBin, "api", u, "FLINT_ADDR="+oldAPIAddr)
	newAPIClient("http://"+oldAPIAddr).waitReady(t, 90*time.Second)
	oldSched := startBinary(t, oldBin, "scheduler", u)
	oldW1 := startBinary(t, oldBin, "worker", u, "FLINT_WORKER_ID=old-1")
	oldW2 := startBinary(t, oldBin, "worker", u, "FLINT_WORKER_ID=old-2")

	load := startUpgradeLoad("http://" + oldAPIAddr)
	load.waitMore(t, 50)

	before := appliedMigrations(t, u)
	migrate := exec.Command(newBin, "migrate")
	migrate.Env = append(os.Environ(), "DATABASE_URL="+u, "REDIS_URL=", "FLINT_LOG_FILE=-")
	out, err := migrate.CombinedOutput()
	require.NoError(t, err, "flint migrate of the new version while the old runs: %s", out)
	require.Greater(t, appliedMigrations(t, u), before, "the new version's migrations extend the old schema")
	load.waitMore(t, 50)

	startBinary(t, newBin, "worker", u, "FLINT_WORKER_ID=new-1")
	waitFor(t, 30*time.Second, "both versions in the registry", func() bool {
		return registryVersions(t, u)[upgradeFromVersion] && registryVersions(t, u)[releaseTestVersion]
	})
	stop(t, oldW1)
	load.waitMore(t, 50)

	startBinary(t, newBin, "api", u, "FLINT_ADDR="+newAPIAddr)
	newAPIClient("http://"+newAPIAddr).waitReady(t, 60*time.Second)
	load.switchTo("http://" + newAPIAddr)
	stop(t, oldAPI)
	load.waitMore(t, 50)

	startBinary(t, newBin, "scheduler", u)
	stop(t, oldSched)
	startBinary(t, newBin, "worker", u, "FLINT_WORKER_ID=new-2")
	stop(t, oldW2)
	load.waitMore(t, 50)
	acked := load.finish()

	s := openStore(t, u)
	ctx := context.Background()
	waitUntil(t, 90*time.Second, func() (bool, string) {
		var done int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(DISTINCT id) FROM `+everyJobSQL+` j
			WHERE id = ANY($1) AND status = 'completed'`, acked).Scan(&done))
		return done == len(acked), fmt.Sprintf("every acknowledged job to complete (%d of %d)", done, len(acked))
	})
	requireNoneDoubled(t, s)
	var oldRuns, newRuns int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE worker_id LIKE 'old-%'),
		count(*) FILTER (WHERE worker_id LIKE 'new-%') FROM job_executions WHERE outcome = 'succeeded'`).Scan(&oldRuns, &newRuns))
	t.Logf("acknowledged=%d lost=0 doubled=0 open=0; runs by the old version's workers %d, by the new version's %d", len(acked), oldRuns, newRuns)
	require.Positive(t, oldRuns, "the old version's workers ran jobs")
	require.Positive(t, newRuns, "the new version's workers ran jobs")
}

// buildOldFlint builds the flint binary of commit from this repository's
// history, reporting version, without the race detector.
func buildOldFlint(t *testing.T, commit, version string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds an older Flint")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	require.NoError(t, err)
	dir := t.TempDir()
	archive := exec.Command("bash", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", bytes.TrimSpace(root), commit, dir))
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(dir, "flint-"+version)
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+version, "-o", bin, ".")
	build.Dir = dir
	out, err = build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// emptyDatabase creates a database with nothing in it, for a binary to
// migrate itself.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	admin := dbtest.AdminURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	name := "flint_upgrade_" + uuid.NewString()[:8]
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	cfg, err := pgx.ParseConfig(admin)
	require.NoError(t, err)
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// appliedMigrations counts the migrations the database has.
func appliedMigrations(t *testing.T, u string) int {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n))
	return n
}

// registryVersions is the set of versions of live Flint processes.
func registryVersions(t *testing.T, u string) map[string]bool {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT DISTINCT version FROM workers WHERE kind = 'process' AND heartbeat_at > now() - interval '30 seconds'`)
	require.NoError(t, err)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out := map[string]bool{}
	for _, v := range vs {
		out[v] = true
	}
	return out
}

// stop ends a process as an operator replacing it does: SIGTERM, then a
// drain.
func stop(t *testing.T, p *proc) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, p.wait(t, 60*time.Second))
}

// upgradeLoad enqueues short jobs through one API at a time, one after
// another, keeping the ids answered 201.
type upgradeLoad struct {
	mu    sync.Mutex
	base  string
	acked []uuid.UUID
	done  chan struct{}
	wg    sync.WaitGroup
}

func startUpgradeLoad(base string) *upgradeLoad {
	l := &upgradeLoad{base: base, done: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		client := &http.Client{Timeout: 30 * time.Second}
		for {
			select {
			case <-l.done:
				return
			default:
			}
			l.mu.Lock()
			base := l.base
			l.mu.Unlock()
			req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewBufferString(`{"type":"sleep","payload":{"ms":20}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
			resp, err := client.Do(req)
			if err != nil {
				time.Sleep(50 * time.Millisecond) // the API is being replaced
				continue
			}
			var body struct {
				ID uuid.UUID `json:"id"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusCreated {
				l.mu.Lock()
				l.acked = append(l.acked, body.ID)
				l.mu.Unlock()
			}
		}
	}()
	return l
}

func (l *upgradeLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitMore waits for n more acknowledged enqueues.
func (l *upgradeLoad) waitMore(t *testing.T, n int) {
	t.Helper()
	want := l.count() + n
	waitFor(t, 60*time.Second, fmt.Sprintf("%d acknowledged enqueues", want), func() bool { return l.count() >= want })
}

func (l *upgradeLoad) switchTo(base string) {
	l.mu.Lock()
	l.base = base
	l.mu.Unlock()
}

func (l *upgradeLoad) finish() []uuid.UUID {
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uuid.UUID(nil), l.acked...)
}
