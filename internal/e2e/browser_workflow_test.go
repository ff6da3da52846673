package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// graphShape is the workflow graph of a job page as the browser shows it:
// each node's label (its first line), its column (x) and whether it is the
// job of the page, and each edge's ends.
type graphShape struct {
	Nodes []struct {
		Label string  `json:"label"`
		Sub   string  `json:"sub"`
		X     float64 `json:"x"`
		Self  bool    `json:"self"`
		Href  string  `json:"href"`
	} `json:"nodes"`
	Edges   int    `json:"edges"`
	Caption string `json:"caption"`
}

const graphReport = `(() => ({
	nodes: [...document.querySelectorAll('[data-testid="graph"] a[data-testid="graph-node"]')].map(a => ({
		label: a.querySelector('text').textContent.trim(),
		sub: a.querySelector('text.sub').textContent.trim(),
		x: +a.querySelector('rect').getAttribute('x'),
		self: a.classList.contains('self'),
		href: a.getAttribute('href'),
	})),
	edges: document.querySelectorAll('[data-testid="graph"] path.edge').length,
	caption: document.querySelector('[data-testid="graph-caption"]').textContent.trim(),
}))()`

// TestWorkflowGraphInABrowser submits a workflow of five steps, four of
// them of one type, and opens the page of its last step: the graph shows
// the whole workflow (not only the direct neighbours), each node labelled
// with its step key, every job to the right of what it waits for; a node
// leads to its job, whose page draws the same workflow around itself.
func TestWorkflowGraphInABrowser(t *testing.T) {
	t.Parallel()
	rig := startDashboard(t)
	ctx := browser(t)
	signIn(t, ctx, rig.base)

	body, _ := json.Marshal(map[string]any{"jobs": []map[string]any{
		{"key": "extract", "type": "noop", "run_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)},
		{"key": "resize", "type": "noop", "depends_on": []string{"extract"}},
		{"key": "thumbnail", "type": "noop", "depends_on": []string{"extract"}},
		{"key": "merge", "type": "noop", "depends_on": []string{"resize", "thumbnail"}},
		{"key": "notify <all>", "type": "flaky", "depends_on": []string{"merge"}},
	}})
	req, err := http.NewRequest(http.MethodPost, rig.base+"/api/v1/workflows", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-API-Key", "browser-test-api-key")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var out struct {
		Jobs []struct {
			Key string `json:"key"`
			ID  string `json:"id"`
		} `json:"jobs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	id := map[string]string{}
	for _, j := range out.Jobs {
		id[j.Key] = j.ID
	}

	within(t, ctx, 20*time.Second, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(rig.base+"/jobs/"+id["notify <all>"]),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="graph"]`)))
	g := eval[graphShape](t, ctx, graphReport)
	col := map[string]float64{}
	for _, n := range g.Nodes {
		col[n.Label] = n.X
		require.Equal(t, "/jobs/"+id[n.Label], n.Href, "node %s leads to its job", n.Label)
		require.Equal(t, n.Label == "notify <all>", n.Self, "only the page's job is outlined")
	}
	require.Len(t, g.Nodes, 5, "the whole workflow, not only the direct neighbours")
	require.ElementsMatch(t, []string{"extract", "resize", "thumbnail", "merge", "notify <all>"}, keys(col), "nodes are labelled by step key")
	require.Contains(t, g.Nodes[0].Sub, "noop", "the type is said under the key")
	require.Equal(t, 5, g.Edges)
	require.Less(t, col["extract"], col["resize"])
	require.Equal(t, col["resize"], col["thumbnail"], "siblings share a column")
	require.Less(t, col["thumbnail"], col["merge"])
	require.Less(t, col["merge"], col["notify <all>"])
	require.Contains(t, g.Caption, "right of the jobs it waits for")
	shoot(t, ctx, "workflow-graph")

	// Follow a node: the same workflow, drawn around another job.
	// (By the link's own href: the job page's live part may be swapped
	// under a pointer click, and the href is what the check above holds.)
	href := eval[string](t, ctx, `document.querySelector('a[data-testid="graph-node"][href="/jobs/`+id["resize"]+`"]').getAttribute('href')`)
	within(t, ctx, 20*time.Second, chromedp.Navigate(rig.base+href),
		chromedp.WaitVisible(chromedp.CSS(`a[data-testid="graph-node"].self[href="/jobs/`+id["resize"]+`"]`)))
	g2 := eval[graphShape](t, ctx, graphReport)
	require.Len(t, g2.Nodes, 5)
	require.Equal(t, 5, g2.Edges)
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
