package views

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// collapseAt is the number of alike jobs (same type, same jobs before and
// after them: a fan-out) from which the graph draws them as one box.
const collapseAt = 8

// collapsed is a workflow graph with each large group of alike jobs drawn
// as one step (the group's first job standing for it) and the groups by
// that step's id.
type collapsed struct {
	graph  domain.WorkflowGraph
	groups map[uuid.UUID][]domain.WorkflowStep
}

// collapseFanOuts groups the steps of g that share their type and the
// sets of jobs they wait for and are waited on by; a group of collapseAt
// or more becomes one step, and its edges one edge each way. The job the
// page is about (self) stays a box of its own.
func collapseFanOuts(self uuid.UUID, g domain.WorkflowGraph) collapsed {
	up := map[uuid.UUID][]string{}
	down := map[uuid.UUID][]string{}
	for _, e := range g.Edges {
		up[e.Job] = append(up[e.Job], e.DependsOn.String())
		down[e.DependsOn] = append(down[e.DependsOn], e.Job.String())
	}
	sig := func(st domain.WorkflowStep) string {
		u, d := up[st.ID], down[st.ID]
		slices.Sort(u)
		slices.Sort(d)
		return st.Type + "|" + strings.Join(u, ",") + "|" + strings.Join(d, ",")
	}
	bySig := map[string][]domain.WorkflowStep{}
	for _, st := range g.Steps {
		if st.ID != self {
			bySig[sig(st)] = append(bySig[sig(st)], st)
		}
	}
	rep := map[uuid.UUID]uuid.UUID{} // member → the step that stands for its group
	out := collapsed{groups: map[uuid.UUID][]domain.WorkflowStep{}}
	for _, st := range g.Steps {
		members := bySig[sig(st)]
		if st.ID == self || len(members) < collapseAt {
			out.graph.Steps = append(out.graph.Steps, st)
			continue
		}
		if _, done := rep[members[0].ID]; done {
			continue
		}
		for _, m := range members {
			rep[m.ID] = members[0].ID
		}
		out.groups[members[0].ID] = members
		out.graph.Steps = append(out.graph.Steps, members[0])
	}
	seen := map[domain.WorkflowEdge]bool{}
	for _, e := range g.Edges {
		if r, ok := rep[e.Job]; ok {
			e.Job = r
		}
		if r, ok := rep[e.DependsOn]; ok {
			e.DependsOn = r
		}
		if !seen[e] {
			seen[e] = true
			out.graph.Edges = append(out.graph.Edges, e)
		}
	}
	out.graph.Complete = g.Complete
	return out
}

// groupLabel says how many jobs a box stands for and where they are:
// "1,000 × square" over "980 completed · 20 queued", with the status the
// box is coloured by (the most common unfinished one, else the most
// common one).
func groupLabel(members []domain.WorkflowStep) (label, sub string, status jobs.State) {
	counts := map[jobs.State]int{}
	for _, m := range members {
		counts[m.Status]++
	}
	states := make([]jobs.State, 0, len(counts))
	for st := range counts {
		states = append(states, st)
	}
	slices.SortFunc(states, func(a, b jobs.State) int { return counts[b] - counts[a] })
	parts := make([]string, len(states))
	status = states[0]
	for i, st := range states {
		parts[i] = fmt.Sprintf("%s %s", Thousands(int64(counts[st])), StatusLabel(st))
	}
	for _, st := range states {
		if !st.Terminal() {
			status = st
			break
		}
	}
	return fmt.Sprintf("%s × %s", Thousands(int64(len(members))), members[0].Type), strings.Join(parts, " · "), status
}
