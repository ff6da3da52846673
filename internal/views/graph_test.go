package views

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestLayoutWorkflowPointsEveryEdgeRight: a job stands one column right of
// the furthest job it waits for (a shortcut edge does not pull it left),
// every edge runs left to right, siblings share a column without
// overlapping, and a job without a step key is labelled by its type.
func TestLayoutWorkflowPointsEveryEdgeRight(t *testing.T) {
	id := func() uuid.UUID { return uuid.Must(uuid.NewV7()) }
	a, b1, b2, c, d := id(), id(), id(), id(), id()
	g := domain.WorkflowGraph{Complete: true, Steps: []domain.WorkflowStep{
		{ID: c, Key: "merge", Type: "noop"}, {ID: a, Key: "extract", Type: "noop"},
		{ID: b1, Key: "resize", Type: "noop"}, {ID: b2, Key: "thumbnail", Type: "noop"},
		{ID: d, Type: "send_email", Status: jobs.StateBlocked},
	}, Edges: []domain.WorkflowEdge{
		{Job: b1, DependsOn: a}, {Job: b2, DependsOn: a}, {Job: c, DependsOn: b1}, {Job: c, DependsOn: b2},
		{Job: c, DependsOn: a}, // a shortcut: merge still comes after resize and thumbnail
		{Job: d, DependsOn: c},
	}}
	out := LayoutWorkflow(c, g)
	at := map[uuid.UUID]GraphNode{}
	for _, n := range out.Nodes {
		at[n.ID] = n
		require.GreaterOrEqual(t, n.X, 0)
		require.LessOrEqual(t, n.X+nodeW, out.Width)
		require.LessOrEqual(t, n.Y+nodeH, out.Height)
	}
	require.Len(t, at, 5)
	require.Len(t, out.Edges, 6)
	col := func(id uuid.UUID) int { return (at[id].X - graphPad) / (nodeW + colGap) }
	require.Equal(t, []int{0, 1, 1, 2, 3}, []int{col(a), col(b1), col(b2), col(c), col(d)})
	for _, e := range g.Edges {
		require.Less(t, at[e.DependsOn].X, at[e.Job].X, "edge into %s runs right", at[e.Job].Label)
	}
	require.NotEqual(t, at[b1].Y, at[b2].Y, "siblings do not overlap")
	require.True(t, at[c].Self)
	require.False(t, at[a].Self)
	require.Equal(t, "merge", at[c].Label)
	require.Equal(t, "noop", at[c].Sub)
	require.Equal(t, "send_email", at[d].Label, "no step key: the type")
	require.Equal(t, ShortID(d), at[d].Sub)
	require.Equal(t, 4*nodeW+3*colGap+2*graphPad, out.Width)
}
