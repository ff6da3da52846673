package domain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// WorkflowNode is one job of a workflow submission: a client-side key and
// the keys of the jobs it depends on within the submission.
type WorkflowNode struct {
	Key       string
	DependsOn []string
}

// CycleError names a dependency cycle by its keys, first key repeated at the
// end: a → b → c → a.
type CycleError struct{ Path []string }

// Error names the cycle: "dependency cycle: a → b → c → a".
func (e *CycleError) Error() string {
	return "dependency cycle: " + strings.Join(e.Path, " → ")
}

// CheckWorkflow validates the graph of a workflow submission: keys present
// and unique, every dependency key known (keys that are not in the
// submission must be job ids, which the caller resolves; here they are
// reported through external), no self-edges and no cycles. It returns the
// keys in an order where every job comes after its dependencies.
func CheckWorkflow(nodes []WorkflowNode, isExternal func(ref string) bool) ([]string, error) {
	return checkGraph(nodes, "jobs", MaxWorkflowJobs, isExternal)
}

// checkGraph is CheckWorkflow for a list named list (the field errors
// name) of at most limit nodes.
func checkGraph(nodes []WorkflowNode, list string, limit int, isExternal func(ref string) bool) ([]string, error) {
	if len(nodes) == 0 {
		return nil, jobs.Invalid(list, "must hold at least one job")
	}
	if len(nodes) > limit {
		return nil, jobs.Invalid(list, "holds %d jobs; the limit is %d", len(nodes), limit)
	}
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		field := fmt.Sprintf("%s[%d].key", list, i)
		switch {
		case n.Key == "":
			return nil, jobs.Invalid(field, "is required: each job of a workflow needs a key the others can refer to")
		case len(n.Key) > jobs.MaxStepKeyLen || !jobs.CleanText(n.Key):
			return nil, jobs.Invalid(field, "must be at most %d characters of text", jobs.MaxStepKeyLen)
		}
		if j, dup := index[n.Key]; dup {
			return nil, jobs.Invalid(field, "%q is also the key of %s[%d]", n.Key, list, j)
		}
		index[n.Key] = i
	}
	for i, n := range nodes {
		for k, d := range n.DependsOn {
			field := fmt.Sprintf("%s[%d].depends_on[%d]", list, i, k)
			if d == n.Key {
				return nil, jobs.Invalid(field, "job %q cannot depend on itself", n.Key)
			}
			if _, ok := index[d]; !ok && (isExternal == nil || !isExternal(d)) {
				return nil, jobs.Invalid(field, "%q is neither a key in this workflow nor a job id", d)
			}
		}
	}
	// Depth-first search with colours; a grey node met again closes a cycle.
	const (
		white = iota
		grey
		black
	)
	colour := make([]int, len(nodes))
	var order []string
	var stack []string
	var visit func(i int) error
	visit = func(i int) error {
		colour[i] = grey
		stack = append(stack, nodes[i].Key)
		for _, d := range nodes[i].DependsOn {
			j, inside := index[d]
			if !inside {
				continue
			}
			switch colour[j] {
			case grey:
				start := slices.Index(stack, d)
				path := append(slices.Clone(stack[start:]), d)
				return &CycleError{Path: path}
			case white:
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		stack = stack[:len(stack)-1]
		colour[i] = black
		order = append(order, nodes[i].Key)
		return nil
	}
	for i := range nodes {
		if colour[i] == white {
			if err := visit(i); err != nil {
				return nil, err
			}
		}
	}
	return order, nil
}

// DependencyRef is a job on the other end of a dependency.
type DependencyRef struct {
	ID     uuid.UUID  `json:"id"`
	Type   string     `json:"type"`
	Status jobs.State `json:"status"`
}

// Dependencies are a job's direct upstream (what it waits for) and
// downstream (what waits for it) jobs. Upstream holds at most
// MaxDependencies by construction; Downstream is cut at MaxDependencies
// too (a job can be waited on by any number), and DownstreamTotal says
// how many there are.
type Dependencies struct {
	Upstream        []DependencyRef `json:"upstream"`
	Downstream      []DependencyRef `json:"downstream"`
	DownstreamTotal int             `json:"downstream_total"`
}

// MaxGraphSteps bounds the workflow graph a job page draws: the jobs
// nearest the one shown, through dependencies either way.
const MaxGraphSteps = 200

// WorkflowStep is one job of a workflow graph.
type WorkflowStep struct {
	ID uuid.UUID
	// Key is the step key the job was submitted with (POST
	// /api/v1/workflows); empty for a job that was given its dependencies
	// one at a time.
	Key    string
	Type   string
	Status jobs.State
}

// WorkflowEdge says that Job waits for DependsOn, or, with Spawned, that
// DependsOn added Job to the workflow (and Job does not wait for it).
type WorkflowEdge struct {
	Job, DependsOn uuid.UUID
	Spawned        bool
}

// WorkflowGraph is the workflow a job belongs to: every job connected to
// it through dependencies, upstream and downstream and across (a sibling
// of a common parent), nearest first. Complete is false when the workflow
// holds more than MaxGraphSteps jobs and only the nearest are in Steps;
// Edges join only jobs in Steps.
type WorkflowGraph struct {
	Steps    []WorkflowStep
	Edges    []WorkflowEdge
	Complete bool
}
