package db_test

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// workflow enqueues jobs named by step key, each waiting for the keys
// listed with it, in one submission as POST /api/v1/workflows does.
func (b *testBundle) workflow(t *testing.T, steps [][]string) map[string]uuid.UUID {
	t.Helper()
	ids := map[string]uuid.UUID{}
	workflow := uuid.Must(uuid.NewV7())
	for _, s := range steps {
		ids[s[0]] = uuid.Must(uuid.NewV7())
	}
	ps := make([]jobs.EnqueueParams, len(steps))
	for i, s := range steps {
		ps[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "wf", ID: ids[s[0]], StepKey: s[0], WorkflowID: workflow}
		for _, d := range s[1:] {
			ps[i].DependsOn = append(ps[i].DependsOn, ids[d])
		}
	}
	_, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
	return ids
}

// TestWorkflowGraphIsTheWholeWorkflow: from any job, the graph holds every
// job of its workflow (not only its direct neighbours: the sibling of a
// parent and the grandchild too) with the step keys it was submitted
// with, the edges between them, and nothing of another workflow.
func TestWorkflowGraphIsTheWholeWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.workflow(t, [][]string{
		{"extract"}, {"resize", "extract"}, {"thumbnail", "extract"},
		{"merge", "resize", "thumbnail"}, {"notify", "merge"},
	})
	other := b.workflow(t, [][]string{{"a"}, {"b", "a"}})
	loose := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{ids["notify"]}}) // given its dependency alone

	g, err := b.store.WorkflowGraph(b.ctx, ids["resize"])
	require.NoError(t, err)
	require.True(t, g.Complete)
	keys := map[uuid.UUID]string{}
	for _, s := range g.Steps {
		keys[s.ID] = s.Key
		require.Equal(t, jobs.TypeNoop, s.Type)
	}
	require.Equal(t, map[uuid.UUID]string{ids["extract"]: "extract", ids["resize"]: "resize", ids["thumbnail"]: "thumbnail",
		ids["merge"]: "merge", ids["notify"]: "notify", loose.ID: ""}, keys)
	require.NotContains(t, keys, other["a"])
	require.Equal(t, ids["resize"], g.Steps[0].ID, "nearest first: the job itself")
	require.ElementsMatch(t, []domain.WorkflowEdge{
		{Job: ids["resize"], DependsOn: ids["extract"]}, {Job: ids["thumbnail"], DependsOn: ids["extract"]},
		{Job: ids["merge"], DependsOn: ids["resize"]}, {Job: ids["merge"], DependsOn: ids["thumbnail"]},
		{Job: ids["notify"], DependsOn: ids["merge"]}, {Job: loose.ID, DependsOn: ids["notify"]},
	}, g.Edges)

	// The same workflow whichever job it is read from.
	g2, err := b.store.WorkflowGraph(b.ctx, loose.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, g.Steps, g2.Steps)

	// A job of no workflow is a workflow of one.
	lone := b.enqueue(t, jobs.EnqueueParams{})
	g, err = b.store.WorkflowGraph(b.ctx, lone.ID)
	require.NoError(t, err)
	require.Len(t, g.Steps, 1)
	require.Empty(t, g.Edges)
}

// TestWorkflowGraphIsBounded: a workflow larger than a page can draw
// gives its nearest jobs and says it holds more; a job waited on by
// hundreds costs no more than the bound.
func TestWorkflowGraphIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A chain of 60, whose head fans out to 300.
	var steps [][]string
	for i := range 60 {
		s := []string{fmt.Sprintf("chain-%02d", i)}
		if i > 0 {
			s = append(s, fmt.Sprintf("chain-%02d", i-1))
		}
		steps = append(steps, s)
	}
	for i := range 300 {
		steps = append(steps, []string{fmt.Sprintf("fan-%03d", i), "chain-59"})
	}
	ids := b.workflow(t, steps)

	g, err := b.store.WorkflowGraph(b.ctx, ids["chain-00"])
	require.NoError(t, err)
	require.False(t, g.Complete)
	require.Len(t, g.Steps, domain.MaxGraphSteps)
	in := map[uuid.UUID]bool{}
	for _, s := range g.Steps {
		in[s.ID] = true
	}
	for i := range 60 {
		require.True(t, in[ids[fmt.Sprintf("chain-%02d", i)]], "the chain is nearer than the fan: chain-%02d", i)
	}
	for _, e := range g.Edges {
		require.True(t, in[e.Job] && in[e.DependsOn], "edges join only jobs drawn")
	}
	require.Len(t, g.Edges, domain.MaxGraphSteps-1, "a chain and a fan: one edge into every job but the first")
}
