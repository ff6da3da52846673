package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// The example program under examples/pipeline passes data along
// workflows; these tests run it as the README's guide does, and kill its
// worker in the middle of a spawn.

// TestPipelineExample: over the API of the example program's serve, a
// workflow whose second step reads the first one's result, a job that
// fans out one job per number plus a join that adds up their results,
// and a batch whose on_success callback reads the batch.
func TestPipelineExample(t *testing.T) {
	t.Parallel()
	bin := exampleProgram(t, "pipeline")
	addr := freeAddr(t)
	startBinary(t, bin, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)

	var wf struct {
		Jobs []struct {
			Key string `json:"key"`
			ID  string `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/workflows", `{"jobs": [
		{"key": "fetch", "type": "fetch", "payload": {"name": "cat.png", "width": 1024}},
		{"key": "resize", "type": "resize", "depends_on": ["fetch"]}]}`, &wf))
	resize := waitCompleted(t, api, wf.Jobs[1].ID)
	thumb := resize["result"].(map[string]any)
	require.Equal(t, "thumb-cat.png", thumb["name"])
	require.Equal(t, 128.0, thumb["width"])
	require.NotZero(t, thumb["checksum"], "read from fetch's result")

	var job map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "extract", "payload": {"numbers": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]}}`, &job))
	waitCompleted(t, api, job["id"].(string))
	var page struct {
		Jobs []map[string]any `json:"jobs"`
	}
	waitFor(t, 60*time.Second, "the total to complete", func() bool {
		page.Jobs = nil
		api.do(t, http.MethodGet, "/api/v1/jobs?type=total&status=completed", nil, &page)
		return len(page.Jobs) == 1
	})
	require.Equal(t, map[string]any{"sum": 385.0}, page.Jobs[0]["result"])

	var batch map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/batches", `{
		"jobs": [{"type": "fetch", "payload": {"name": "a.png", "width": 10}}, {"type": "fetch", "payload": {"name": "b.png", "width": 20}}],
		"on_success": {"type": "report"}}`, &batch))
	id := batch["id"].(string)
	waitFor(t, 60*time.Second, "the batch's callback to complete", func() bool {
		batch = nil
		api.do(t, http.MethodGet, "/api/v1/batches/"+id, nil, &batch)
		cb, _ := batch["callbacks"].(map[string]any)["on_success"].(map[string]any)
		return cb != nil && cb["status"] == "completed"
	})
	require.Equal(t, "succeeded", batch["state"])
	report := waitCompleted(t, api, batch["callbacks"].(map[string]any)["on_success"].(map[string]any)["id"].(string))
	require.Equal(t, map[string]any{"batch": id, "members": 2.0, "completed": 2.0}, report["result"])
}

// TestSpawnKilledBetweenGraftAndCommit: the worker process that runs a
// spawning job is killed with SIGKILL after its completion has written the
// jobs it spawns and before it commits (held there by an uncommitted row
// that takes one of their keys): nothing it spawned exists; once the lease
// expires the job runs again on another worker and its 50 squares and
// their total are created once, and complete.
func TestSpawnKilledBetweenGraftAndCommit(t *testing.T) {
	t.Parallel()
	bin := exampleProgram(t, "pipeline")
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	startFlint(t, "serve", u, "FLINT_ADDR="+addr) // the API, the reaper, and workers without the example's types
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)
	store := openStore(t, u)
	ctx := context.Background()

	// The queue is paused while the workflow is submitted and its key
	// "total" is taken by a transaction that stays open: the graft's
	// insert of that key then waits for it, inside the completion's
	// transaction, where the worker is killed.
	w1 := startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=doomed")
	w1.ready(t, 60*time.Second)
	require.Equal(t, http.StatusOK, api.do(t, http.MethodPost, "/api/v1/queues/spawn/pause", nil, nil))
	numbers := make([]string, 50)
	for i := range numbers {
		numbers[i] = fmt.Sprint(i + 1)
	}
	var wf struct {
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	waitFor(t, 30*time.Second, "the API to accept the type its worker serves", func() bool {
		return api.do(t, http.MethodPost, "/api/v1/workflows",
			`{"jobs": [{"key": "extract", "type": "extract", "queue": "spawn", "payload": {"numbers": [`+strings.Join(numbers, ",")+`]}}]}`, &wf) == http.StatusCreated
	})
	extract := wf.Jobs[0].ID
	var workflow uuid.UUID
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT workflow_id FROM workflow_steps WHERE job_id = $1`, extract).Scan(&workflow))
	var placeholder map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "noop", "queue": "elsewhere", "delay_seconds": 3600}`, &placeholder))
	hold, err := store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer hold.Rollback(ctx) //nolint:errcheck
	_, err = hold.Exec(ctx, `INSERT INTO workflow_steps (job_id, step_key, workflow_id) VALUES ($1, 'total', $2)`, placeholder["id"], workflow)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, api.do(t, http.MethodPost, "/api/v1/queues/spawn/resume", nil, nil))

	waitFor(t, 60*time.Second, "the completion to wait on the held key", func() bool {
		var n int
		require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO workflow_steps%' AND pid <> pg_backend_pid()`).Scan(&n))
		return n == 1
	})
	require.NoError(t, w1.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, w1.wait(t, 30*time.Second), "killed")
	require.NoError(t, hold.Rollback(ctx))

	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, store.Pool().QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	waitFor(t, 30*time.Second, "the killed worker's transaction to end", func() bool {
		return count(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO workflow_steps%'`) == 0
	})
	require.Zero(t, count(`SELECT count(*) FROM jobs WHERE type IN ('square', 'total')`), "nothing of the spawn committed")

	startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=survivor").ready(t, 60*time.Second)
	waitFor(t, 120*time.Second, "the total to complete", func() bool {
		return count(`SELECT count(*) FROM jobs WHERE type = 'total' AND status = 'completed'`) == 1
	})
	require.Equal(t, 50, count(`SELECT count(*) FROM jobs WHERE type = 'square' AND status = 'completed'`), "each square once")
	require.Equal(t, 51, count(`SELECT count(*) FROM workflow_steps WHERE workflow_id = $1 AND spawned_by IS NOT NULL`, workflow))
	var sum string
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT result->>'sum' FROM jobs WHERE type = 'total'`).Scan(&sum))
	require.Equal(t, "42925", sum)
	require.Equal(t, 1, count(`SELECT count(*) FROM job_executions WHERE job_id = $1 AND outcome = 'interrupted'`, extract))
	require.Equal(t, 1, count(`SELECT count(*) FROM job_executions WHERE job_id = $1 AND outcome = 'succeeded'`, extract))
}

// TestBatchOfTenThousandAcrossWorkers: four worker processes finish a
// batch's 10,000 members; on_success and on_complete are each enqueued
// exactly once, and the callbacks run. A second batch, one of whose
// members dies, enqueues on_death once and never on_success.
func TestBatchOfTenThousandAcrossWorkers(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	startFlint(t, "api", u, "FLINT_ADDR="+addr)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)
	store := openStore(t, u)
	ctx := context.Background()

	members := make([]string, 10_000)
	for i := range members {
		members[i] = fmt.Sprintf(`{"type": "noop", "queue": "big", "payload": {"i": %d}}`, i)
	}
	var big, doomed map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/batches", `{"jobs": [`+strings.Join(members, ",")+`],
		"on_success": {"type": "noop", "queue": "cb", "payload": {"kind": "success"}},
		"on_complete": {"type": "noop", "queue": "cb", "payload": {"kind": "complete"}},
		"on_death": {"type": "noop", "queue": "cb", "payload": {"kind": "death"}}}`, &big))
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/batches", `{"jobs": [
		{"type": "noop", "queue": "big"}, {"type": "fail", "queue": "big", "max_retries": 0, "payload": {"message": "no"}}, {"type": "noop", "queue": "big"}],
		"on_success": {"type": "noop", "queue": "cb2"}, "on_death": {"type": "noop", "queue": "cb2", "payload": {"kind": "death"}}}`, &doomed))
	for i := range 4 {
		startFlint(t, "worker", u, fmt.Sprintf("FLINT_WORKER_ID=w%d", i), "FLINT_WORKERS=25")
	}
	for _, id := range []string{big["id"].(string), doomed["id"].(string)} {
		waitUntil(t, 180*time.Second, func() (bool, string) {
			var b map[string]any
			api.do(t, http.MethodGet, "/api/v1/batches/"+id, nil, &b)
			state := fmt.Sprintf("batch %s to settle and its callbacks to finish (it is %v, counts %v, callbacks %v)", id, b["state"], b["counts"], b["callbacks"])
			if b["settled_at"] == nil {
				return false, state
			}
			for _, cb := range b["callbacks"].(map[string]any) {
				if st := cb.(map[string]any)["status"]; st != "completed" && st != "skipped" {
					return false, state
				}
			}
			return true, state
		})
	}
	count := func(q string) int {
		var n int
		require.NoError(t, store.Pool().QueryRow(ctx, q).Scan(&n))
		return n
	}
	require.Equal(t, 10_000, count(`SELECT count(*) FROM jobs WHERE batch_id = '`+big["id"].(string)+`' AND status = 'completed'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM jobs WHERE queue = 'cb' AND payload->>'kind' = 'success' AND status = 'completed'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM jobs WHERE queue = 'cb' AND payload->>'kind' = 'complete' AND status = 'completed'`))
	require.Zero(t, count(`SELECT count(*) FROM jobs WHERE queue = 'cb' AND payload->>'kind' = 'death'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM jobs WHERE queue = 'cb2' AND payload->>'kind' = 'death' AND status = 'completed'`))
	require.Zero(t, count(`SELECT count(*) FROM jobs WHERE queue = 'cb2' AND payload->>'kind' IS NULL`), "no on_success for a batch with a dead member")
	var got map[string]any
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/batches/"+big["id"].(string), nil, &got))
	require.Equal(t, "succeeded", got["state"])
	require.Equal(t, map[string]any{"completed": 10000.0}, got["counts"])
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/batches/"+doomed["id"].(string), nil, &got))
	require.Equal(t, "dead", got["state"])
	require.Equal(t, map[string]any{"completed": 2.0, "dead_letter": 1.0}, got["counts"])
}

// TestBatchEventStream: a stream of one batch's events (batch_id) gets its
// members' moves, its callback's enqueue, and one "event: batch" when it
// settles; another batch's events stay out of it.
func TestBatchEventStream(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	startFlint(t, "serve", u, "FLINT_ADDR="+addr)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)
	require.Equal(t, http.StatusOK, api.do(t, http.MethodPost, "/api/v1/queues/ev/pause", nil, nil))
	var mine, other map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/batches",
		`{"jobs": [{"type": "noop", "queue": "ev"}, {"type": "noop", "queue": "ev"}], "on_complete": {"type": "noop", "queue": "cb"}}`, &mine))
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/batches", `{"jobs": [{"type": "noop", "queue": "ev"}]}`, &other))
	id := mine["id"].(string)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.base+"/api/v1/sse/events?batch_id="+id, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", api.key)
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, http.StatusOK, stream.StatusCode)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	require.Equal(t, http.StatusOK, api.do(t, http.MethodPost, "/api/v1/queues/ev/resume", nil, nil))

	// The settlement is announced by the transaction that settles the
	// batch, the members' moves by the process that moved them once that
	// transaction has committed: either may come first.
	var completed, callback int
	var event string
	for settled := false; !settled || completed < 2 || callback < 1; {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended")
			switch {
			case strings.HasPrefix(l, "event: "):
				event = strings.TrimPrefix(l, "event: ")
			case strings.HasPrefix(l, "data: ") && event == "batch":
				var e struct {
					BatchID string `json:"batch_id"`
					State   string `json:"state"`
				}
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &e))
				require.Equal(t, id, e.BatchID)
				require.Equal(t, "succeeded", e.State)
				settled = true
			case strings.HasPrefix(l, "data: "):
				var e struct {
					BatchID string `json:"batch_id"`
					Status  string `json:"status"`
					Queue   string `json:"queue"`
				}
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &e))
				require.Equal(t, id, e.BatchID, "only this batch's events: %s", l)
				if e.Queue == "ev" && e.Status == "completed" {
					completed++
				}
				if e.Queue == "cb" {
					callback++
				}
			}
		case <-ctx.Done():
			t.Fatalf("settled %v, %d members' completions and %d callback events seen", settled, completed, callback)
		}
	}
	require.Equal(t, 2, completed, "both members' completions")
}
