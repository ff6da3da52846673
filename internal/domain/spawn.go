package domain

import (
	"errors"

	"github.com/flinthq/flint/jobs"
)

// CheckSpawnGraph checks a whole spawn list: at most MaxSpawnJobs jobs,
// keys unique, and no cycle among them (dependencies on keys outside the
// list are the workflow's existing jobs, which the store resolves). Field
// names in errors are relative to the list ("spawn[3].key").
func CheckSpawnGraph(list []jobs.Spawned) error {
	if len(list) > jobs.MaxSpawnJobs {
		return jobs.Invalid("spawn", "holds %d jobs; the limit is %d per attempt", len(list), jobs.MaxSpawnJobs)
	}
	nodes := make([]WorkflowNode, len(list))
	for i, sp := range list {
		nodes[i] = WorkflowNode{Key: sp.Key, DependsOn: sp.DependsOn}
	}
	outside := func(string) bool { return true }
	if _, err := checkGraph(nodes, "spawn", jobs.MaxSpawnJobs, outside); err != nil {
		var ce *CycleError
		if errors.As(err, &ce) {
			return jobs.Invalid("spawn", "%s", ce.Error())
		}
		return err
	}
	return nil
}
