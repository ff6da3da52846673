package views

import (
	"fmt"

	"github.com/google/uuid"

	"flint/jobs"
)

// GraphNode is a box in the dependency graph.
type GraphNode struct {
	ID     uuid.UUID
	Label  string
	Status jobs.State
	X, Y   int
	Self   bool
}

// GraphEdge is a curve from one node's right side to another's left.
type GraphEdge struct{ Path string }

// DependencyGraph lays out a job with its upstream jobs on the left and its
// downstream jobs on the right. Width and Height are CSS pixels: the page
// draws the graph at that size (never scaled down, so its text stays
// readable) and scrolls it when it does not fit.
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
	labelRunes   = 20 // of a node's type: 13px text in a 184px box
)

// LayoutDependencies builds the graph for a job page.
func LayoutDependencies(j *jobs.Job, deps jobs.Dependencies) DependencyGraph {
	rows := max(len(deps.Upstream), len(deps.Downstream), 1)
	h := rows*(nodeH+rowGap) - rowGap + 2*graphPad
	cols := 1
	if len(deps.Upstream) > 0 {
		cols++
	}
	if len(deps.Downstream) > 0 {
		cols++
	}
	g := DependencyGraph{Width: cols*nodeW + (cols-1)*colGap + 2*graphPad, Height: h}
	x := graphPad
	column := func(refs []jobs.DependencyRef) []GraphNode {
		var out []GraphNode
		top := (h - (len(refs)*(nodeH+rowGap) - rowGap)) / 2
		for i, r := range refs {
			out = append(out, GraphNode{ID: r.ID, Label: r.Type, Status: r.Status, X: x, Y: top + i*(nodeH+rowGap)})
		}
		return out
	}
	var up, down []GraphNode
	if len(deps.Upstream) > 0 {
		up = column(deps.Upstream)
		x += nodeW + colGap
	}
	self := GraphNode{ID: j.ID, Label: j.Type, Status: j.Status, X: x, Y: (h - nodeH) / 2, Self: true}
	x += nodeW + colGap
	if len(deps.Downstream) > 0 {
		down = column(deps.Downstream)
	}
	curve := func(a, b GraphNode) GraphEdge {
		x1, y1 := a.X+nodeW, a.Y+nodeH/2
		x2, y2 := b.X, b.Y+nodeH/2
		mid := (x1 + x2) / 2
		return GraphEdge{Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2-6, y2)}
	}
	for _, u := range up {
		g.Edges = append(g.Edges, curve(u, self))
	}
	for _, d := range down {
		g.Edges = append(g.Edges, curve(self, d))
	}
	g.Nodes = append(append(append(g.Nodes, up...), self), down...)
	return g
}
