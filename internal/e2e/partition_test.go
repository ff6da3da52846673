package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// TestNetworkPartition puts a loopback proxy between PostgreSQL and one
// `flint worker` and one `flint api`, and partitions them off while they
// hold connections open: in one variant the proxy swallows every byte (a
// firewall or NAT that lost the connections' state), in the other it stops
// reading and later drains (packets delayed, as TCP retransmission would
// deliver them). During the partition the API answers 503 with Retry-After
// rather than hanging, and another worker re-runs the jobs the cut-off one
// held once their leases expire. Then the other worker stops, the network
// heals, and the cut-off worker, left alone, runs 200 new jobs within 30 s:
// its hung statements ended at their deadline (db/netfaults.go). No job
// completes twice, nothing stays running, every process stays up.
func TestNetworkPartition(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"swallow", "stall"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			partitionScenario(t, mode)
		})
	}
}

func partitionScenario(t *testing.T, mode string) {
	ctx := context.Background()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	proxy, pu := dbtest.NewProxy(t, u)
	startFlint(t, "scheduler", u)
	cut := startFlint(t, "worker", pu, "FLINT_WORKER_ID=cut")
	addr := freeAddr(t)
	api := startFlint(t, "api", pu, "FLINT_ADDR="+addr)
	base := "http://" + addr
	waitFor(t, 60*time.Second, "the API to be ready", func() bool {
		code, _ := postJob(base, 5*time.Second)
		return code == http.StatusCreated
	})

	held := enqueueAll(t, s, sleepJob(3000), sleepJob(3000), sleepJob(3000))
	waitJobs(t, s, held, 60*time.Second, func(j *jobs.Job) bool {
		return j.Status == jobs.StateRunning && j.WorkerID != nil && *j.WorkerID == "cut"
	})
	if mode == "swallow" {
		proxy.Swallow()
	} else {
		proxy.Stall()
	}
	cutAt := time.Now()

	// The API answers, and says when to come back.
	code, retry := postJob(base, 45*time.Second)
	require.Equal(t, http.StatusServiceUnavailable, code, "an enqueue during the partition")
	require.NotEmpty(t, retry, "Retry-After")
	t.Logf("%s: the API answered 503 %s after the cut", mode, time.Since(cutAt).Round(time.Millisecond))

	// The cut-off worker's jobs are re-run by another.
	rescuer := startFlint(t, "worker", u, "FLINT_WORKER_ID=rescuer")
	waitJobs(t, s, held, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	require.NoError(t, rescuer.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, rescuer.wait(t, 30*time.Second))

	proxy.Heal()
	healed := time.Now()
	t.Logf("%s: partitioned for %s", mode, healed.Sub(cutAt).Round(time.Millisecond))
	fresh := make([]jobs.EnqueueParams, 200)
	for i := range fresh {
		fresh[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
	}
	var ids []uuid.UUID
	for _, j := range enqueueAll(t, s, fresh...) {
		ids = append(ids, j.ID)
	}
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var done int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs
			WHERE id = ANY($1) AND status = 'completed' AND worker_id = 'cut'`, ids).Scan(&done))
		return done == len(fresh), "the cut-off worker to run the 200 jobs enqueued after the network healed"
	})
	t.Logf("%s: the cut-off worker ran 200 new jobs %s after the network healed", mode, time.Since(healed).Round(time.Millisecond))
	waitFor(t, 30*time.Second, "the API to accept enqueues again", func() bool {
		code, _ := postJob(base, 10*time.Second)
		return code == http.StatusCreated
	})
	requireNoneDoubled(t, s)
	for _, p := range []*proc{cut, api} {
		select {
		case <-p.done:
			t.Fatalf("a process cut off by the partition exited: %v", p.err)
		default:
		}
	}
}

// TestStartDuringAPartition starts a `flint api` and a `flint worker`
// while the network to PostgreSQL swallows every byte: both wait, saying
// so, rather than exit, and start by themselves once the network heals;
// the API then takes enqueues and the worker runs them.
func TestStartDuringAPartition(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	proxy, pu := dbtest.NewProxy(t, u)
	proxy.Swallow()
	addr := freeAddr(t)
	api := startFlint(t, "api", pu, "FLINT_ADDR="+addr)
	worker := startFlint(t, "worker", pu, "FLINT_WORKER_ID=late")
	for _, p := range []*proc{api, worker} {
		waitFor(t, 60*time.Second, "the process to say it waits for PostgreSQL", func() bool {
			select {
			case <-p.done:
				t.Fatalf("a process started during a partition exited: %v\n%s", p.err, p.out.String())
			default:
			}
			return strings.Contains(p.out.String(), "cannot reach PostgreSQL at start; trying again")
		})
	}
	require.NotContains(t, api.out.String()+worker.out.String(), `"msg":"flint started"`)

	proxy.Heal()
	api.ready(t, 60*time.Second)
	worker.ready(t, 60*time.Second)
	waitFor(t, 30*time.Second, "the API to take an enqueue", func() bool {
		code, _ := postJob("http://"+addr, 10*time.Second)
		return code == http.StatusCreated
	})
	waitJobs(t, s, enqueueAll(t, s, jobs.EnqueueParams{Type: jobs.TypeNoop}), 30*time.Second, func(j *jobs.Job) bool {
		return j.Status == jobs.StateCompleted && j.WorkerID != nil && *j.WorkerID == "late"
	})
}

// postJob enqueues a noop through the API, giving up after timeout, and
// returns the status (0 if there was no answer) and Retry-After.
func postJob(base string, timeout time.Duration) (int, string) {
	client := &http.Client{Timeout: timeout}
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewBufferString(`{"type":"noop"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "test-key-0123456789abcdef")
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// requireNoneDoubled checks that no job succeeded twice and none is left
// running once every job has completed.
func requireNoneDoubled(t *testing.T, s *db.Store) {
	t.Helper()
	ctx := context.Background()
	waitUntil(t, 30*time.Second, func() (bool, string) {
		var open int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status <> 'completed'`).Scan(&open))
		return open == 0, "every job to complete"
	})
	var doubled int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM `+everyRunSQL+` r
		WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) > 1) d`).Scan(&doubled))
	require.Zero(t, doubled, "jobs that succeeded twice")
	var total int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+everyJobSQL+` j`).Scan(&total))
	t.Logf("lost=0 doubled=%d open=0 of %d jobs", doubled, total)
}
