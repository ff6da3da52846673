package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// fanOutHandlers registers extract (returns items 1..n), split (reads
// extract's result and spawns one square per item and a sum over them),
// square and sum.
func fanOutHandlers(n int) func(*jobs.Registry) {
	return func(reg *jobs.Registry) {
		reg.Register("extract", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) {
			items := make([]int, n)
			for i := range items {
				items[i] = i + 1
			}
			return map[string][]int{"items": items}, nil
		}))
		reg.Register("split", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
			in, err := jobs.ParentResult[struct{ Items []int }](ctx, "extract")
			if err != nil {
				return nil, err
			}
			sum := jobs.SpawnJob{Key: "sum", Type: "sum"}
			var specs []jobs.SpawnJob
			for _, it := range in.Items {
				k := fmt.Sprintf("square-%d", it)
				specs = append(specs, jobs.SpawnJob{Key: k, Type: "square", Payload: map[string]int{"n": it}, DependsOn: []string{jobs.Self}})
				sum.DependsOn = append(sum.DependsOn, k)
			}
			return map[string]int{"spawned": len(specs)}, jobs.Spawn(ctx, append(specs, sum)...)
		}))
		reg.Register("square", jobs.HandlerFunc(func(_ context.Context, j *jobs.Job) (any, error) {
			var p struct{ N int }
			return p.N * p.N, json.Unmarshal(j.Payload, &p)
		}))
		reg.Register("sum", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
			total := 0
			for _, k := range jobs.ParentsOf(ctx).Keys() {
				v, err := jobs.ParentResult[int](ctx, k)
				if err != nil {
					return nil, err
				}
				total += v
			}
			return map[string]int{"sum": total}, nil
		}))
	}
}

// apiCall sends body to the rig's API and decodes the answer into out.
func (r *dashboardRig) apiCall(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, r.base+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "browser-test-api-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// TestWorkflowDataInABrowser: a job's page shows the parents' results it
// read and the jobs it added; the fan-out it added is one box of the
// graph that counts them; the join's page lists every parent's result.
func TestWorkflowDataInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t, fanOutHandlers(24))
	var wf struct {
		Jobs []struct {
			Key string    `json:"key"`
			ID  uuid.UUID `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, rig.apiCall(t, http.MethodPost, "/api/v1/workflows", map[string]any{"jobs": []map[string]any{
		{"key": "extract", "type": "extract"}, {"key": "split", "type": "split", "depends_on": []string{"extract"}}}}, &wf))
	split := wf.Jobs[1].ID
	var sumID uuid.UUID
	waitFor(t, 60*time.Second, "the join to complete", func() bool {
		var status string
		err := rig.store.Pool().QueryRow(context.Background(), `SELECT j.id, j.status FROM jobs j JOIN workflow_steps s ON s.job_id = j.id WHERE s.step_key = 'sum'`).Scan(&sumID, &status)
		return err == nil && status == "completed"
	})
	sum, err := rig.store.GetJob(context.Background(), sumID)
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"sum": %d}`, 24*25*49/6), string(sum.Result))

	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+split.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-data"]`)))
	type dataShape struct {
		Parents []string `json:"parents"`
		Results []string `json:"results"`
		Spawned int      `json:"spawned"`
		Groups  []int    `json:"groups"`
		Dashed  int      `json:"dashed"`
	}
	const dataReport = `(() => ({
		parents: [...document.querySelectorAll('[data-testid="parent-row"] td:first-child')].map(td => td.textContent.trim()),
		results: [...document.querySelectorAll('[data-testid="parent-row"] pre[data-testid="parent-result"]')].map(p => p.textContent),
		spawned: document.querySelectorAll('[data-testid="spawned-row"]').length,
		groups: [...document.querySelectorAll('[data-testid="graph-node"].group')].map(a => +a.dataset.count),
		dashed: document.querySelectorAll('[data-testid="graph"] path.edge.spawned').length,
	}))()`
	d := eval[dataShape](t, ctx, dataReport)
	require.Equal(t, []string{"extract"}, d.Parents)
	require.Contains(t, d.Results[0], `"items"`)
	require.Equal(t, domain.MaxSpawnedShown, d.Spawned, "the first of the 24 squares and the join")
	require.Contains(t, eval[string](t, ctx, `document.querySelector('[data-testid="job-data"]').textContent`), "and 13 more")
	require.Equal(t, []int{24}, d.Groups, "the squares are one box of the graph")
	require.Equal(t, 1, d.Dashed, "the join waits for the squares, not for split: it hangs from split by a dashed spawn edge")
	shoot(t, ctx, "job-spawned")

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+sumID.String()),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="parents-table"]`)))
	d = eval[dataShape](t, ctx, dataReport)
	require.Len(t, d.Parents, 24)
	require.Contains(t, d.Parents, "square-7")
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll('[data-testid="job-spawned-by"]').length`), "the join says which job added it")
}

// TestBatchPagesInABrowser: the batches list and a batch's page show its
// state, progress and callbacks; the page follows the batch live as its
// members finish (a paused queue resumed), and its counts lead to the
// jobs list filtered to the batch.
func TestBatchPagesInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	require.Equal(t, http.StatusOK, rig.apiCall(t, http.MethodPost, "/api/v1/queues/held/pause", map[string]any{}, nil))
	members := make([]map[string]any, 30)
	for i := range members {
		members[i] = map[string]any{"type": "noop", "queue": "held", "payload": map[string]int{"i": i}}
	}
	var b struct {
		ID string `json:"id"`
	}
	require.Equal(t, http.StatusCreated, rig.apiCall(t, http.MethodPost, "/api/v1/batches", map[string]any{"jobs": members,
		"on_success": map[string]any{"type": "noop", "queue": "callbacks"}, "on_death": map[string]any{"type": "noop"}}, &b))

	ctx := browser(t)
	signIn(t, ctx, rig.base)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/batches"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="batch-row"][data-batch="`+b.ID+`"]`)))
	require.Equal(t, "running", eval[string](t, ctx, `document.querySelector('[data-batch="`+b.ID+`"] [data-testid="batch-state"]').textContent.trim()`))
	shoot(t, ctx, "batches")

	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/batches/"+b.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="batch-counts"]`)))
	waitLive(t, ctx, 10*time.Second)
	type batchShape struct {
		State     string            `json:"state"`
		Counts    map[string]string `json:"counts"`
		Callbacks map[string]string `json:"callbacks"`
	}
	const batchReport = `(() => ({
		state: document.querySelector('#batch-live [data-testid="batch-state"]').textContent.trim(),
		counts: Object.fromEntries([...document.querySelectorAll('[data-testid="batch-count"]')].map(r => [r.dataset.status, r.querySelector('a').textContent.trim()])),
		callbacks: Object.fromEntries([...document.querySelectorAll('[data-testid="batch-callback"]')].map(r => [r.dataset.kind, r.querySelector('td:last-child').textContent.trim()])),
	}))()`
	s := eval[batchShape](t, ctx, batchReport)
	require.Equal(t, batchShape{State: "running", Counts: map[string]string{"queued": "30"},
		Callbacks: map[string]string{"on_success": "pending", "on_death": "pending"}}, s)

	// Resume the queue: the page follows the batch to its settlement
	// without a reload.
	require.Equal(t, http.StatusOK, rig.apiCall(t, http.MethodPost, "/api/v1/queues/held/resume", map[string]any{}, nil))
	waitJS(t, ctx, `document.querySelector('#batch-live [data-testid="batch-state"]').textContent.trim() === 'succeeded'`, 60*time.Second)
	s = eval[batchShape](t, ctx, batchReport)
	require.Equal(t, map[string]string{"completed": "30"}, s.Counts)
	require.Contains(t, s.Callbacks["on_success"], "enqueued", "fired")
	require.Contains(t, s.Callbacks["on_death"], "skipped")
	require.Equal(t, "100.000", eval[string](t, ctx, `document.querySelector('#batch-live [data-testid="batch-bar"] rect.seg-completed').getAttribute('width')`),
		"the bar is all completed")
	shoot(t, ctx, "batch")

	within(t, ctx, 20*time.Second, chromedp.Click(chromedp.CSS(`[data-testid="batch-count"][data-status="completed"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="filter-batch"]`)))
	require.Equal(t, 30, eval[int](t, ctx, `document.querySelectorAll('#jobs-table [data-testid="job-row"]').length`))

	// A member's page links to its batch.
	var member string
	require.NoError(t, rig.store.Pool().QueryRow(context.Background(), `SELECT id::text FROM jobs WHERE batch_id = $1 LIMIT 1`, b.ID).Scan(&member))
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+"/jobs/"+member),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="job-batch"] a[href="/batches/`+b.ID+`"]`)))
}
