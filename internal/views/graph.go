package views

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// GraphNode is a box in the workflow graph.
type GraphNode struct {
	ID uuid.UUID
	// Label is the job's step key, or its type when it has none; Sub is
	// the type under a step key, or the short id under a type.
	Label, Sub string
	Status     jobs.State
	X, Y       int
	Self       bool
	// Count is how many alike jobs the box stands for (a fan-out drawn
	// as one); 1 for a job of its own.
	Count int
}

// GraphEdge is a curve from one node's right side to another's left;
// Spawned marks a job added by the one it starts from (no dependency).
type GraphEdge struct {
	Path    string
	Spawned bool
}

// DependencyGraph lays out a workflow in columns: each job to the right of
// every job it waits for. Width and Height are CSS pixels: the page draws
// the graph at that size (never scaled down, so its text stays readable)
// and scrolls it when it does not fit.
type DependencyGraph struct {
	Width, Height int
	Nodes         []GraphNode
	Edges         []GraphEdge
}

const (
	nodeW, nodeH = 184, 46
	colGap       = 64
	rowGap       = 12
	graphPad     = 12
	labelRunes   = 20 // of a node's label: 13px text in a 184px box
)

// LayoutWorkflow draws the workflow g of the job self. A job's column is
// the length of the longest chain of jobs it waits for, so every edge
// points right; within a column, jobs sit near the average row of what
// they wait for (which keeps edges short and rarely crossing), then in
// step key order.
//
// Large fan-outs (collapseAt or more jobs of one type between the same
// jobs) are drawn as one box saying how many jobs it stands for and where
// they are, so that a workflow of hundreds of jobs stays a readable map.
func LayoutWorkflow(self uuid.UUID, whole domain.WorkflowGraph) DependencyGraph {
	folded := collapseFanOuts(self, whole)
	g := folded.graph
	col := workflowColumns(g)
	cols := make([][]int, 0, 4) // step indexes by column, in row order
	for i := range g.Steps {
		for len(cols) <= col[i] {
			cols = append(cols, nil)
		}
		cols[col[i]] = append(cols[col[i]], i)
	}
	parents := make(map[uuid.UUID][]uuid.UUID, len(g.Steps))
	for _, e := range g.Edges {
		parents[e.Job] = append(parents[e.Job], e.DependsOn)
	}
	row := make(map[uuid.UUID]float64, len(g.Steps))
	rows := 1
	for c, members := range cols {
		weight := func(i int) float64 {
			ps := parents[g.Steps[i].ID]
			if c == 0 || len(ps) == 0 {
				return -1
			}
			sum := 0.0
			for _, p := range ps {
				sum += row[p]
			}
			return sum / float64(len(ps))
		}
		slices.SortStableFunc(members, func(a, b int) int {
			return cmp.Or(cmp.Compare(weight(a), weight(b)),
				cmp.Compare(g.Steps[a].Key, g.Steps[b].Key),
				cmp.Compare(g.Steps[a].ID.String(), g.Steps[b].ID.String()))
		})
		for r, i := range members {
			row[g.Steps[i].ID] = float64(r)
		}
		rows = max(rows, len(members))
	}
	h := rows*(nodeH+rowGap) - rowGap + 2*graphPad
	out := DependencyGraph{Width: len(cols)*nodeW + (len(cols)-1)*colGap + 2*graphPad, Height: h}
	at := make(map[uuid.UUID]GraphNode, len(g.Steps))
	for col, members := range cols {
		top := (h - (len(members)*(nodeH+rowGap) - rowGap)) / 2
		for r, i := range members {
			st := g.Steps[i]
			n := GraphNode{ID: st.ID, Label: st.Key, Sub: st.Type, Status: st.Status, Self: st.ID == self,
				X: graphPad + col*(nodeW+colGap), Y: top + r*(nodeH+rowGap), Count: 1}
			if st.Key == "" {
				n.Label, n.Sub = st.Type, ShortID(st.ID)
			}
			if members, ok := folded.groups[st.ID]; ok {
				n.Count = len(members)
				n.Label, n.Sub, n.Status = groupLabel(members)
			}
			at[st.ID] = n
			out.Nodes = append(out.Nodes, n)
		}
	}
	for _, e := range g.Edges {
		a, b := at[e.DependsOn], at[e.Job]
		x1, y1 := a.X+nodeW, a.Y+nodeH/2
		x2, y2 := b.X, b.Y+nodeH/2
		mid := (x1 + x2) / 2
		out.Edges = append(out.Edges, GraphEdge{Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2-6, y2),
			Spawned: e.Spawned})
	}
	return out
}

// workflowColumns returns each step's column: 0 for a job that waits for
// none of the others drawn, else one more than the highest column among
// those it waits for (steps in topological order, Kahn's algorithm).
func workflowColumns(g domain.WorkflowGraph) []int {
	index := make(map[uuid.UUID]int, len(g.Steps))
	for i, st := range g.Steps {
		index[st.ID] = i
	}
	waits := make([]int, len(g.Steps))
	next := make([][]int, len(g.Steps))
	for _, e := range g.Edges {
		child, okC := index[e.Job]
		parent, okP := index[e.DependsOn]
		if !okC || !okP {
			continue
		}
		waits[child]++
		next[parent] = append(next[parent], child)
	}
	col := make([]int, len(g.Steps))
	var ready []int
	for i, w := range waits {
		if w == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		for _, c := range next[i] {
			col[c] = max(col[c], col[i]+1)
			if waits[c]--; waits[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	return col
}
