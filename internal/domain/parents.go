package domain

import (
	"encoding/json"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// MaxSpawnedShown is how many of the jobs a job added its page lists
// (the workflow graph shows them all, folded).
const MaxSpawnedShown = 12

// MaxParentShown bounds a parent's result as the job page shows it; a
// larger one is linked rather than shown.
const MaxParentShown = 8 << 10

// ParentRef is a job's parent as its page shows it: the key it is known
// by (step key, or job id outside the workflow), the job, and its result
// (nil when it returned none or it is over MaxParentShown: Bytes says
// which).
type ParentRef struct {
	Key    string          `json:"key"`
	ID     uuid.UUID       `json:"id"`
	Type   string          `json:"type"`
	Status jobs.State      `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Bytes  int             `json:"bytes"`
}

// SpawnedRef is a job that another job's completion added to its
// workflow.
type SpawnedRef struct {
	Key    string     `json:"key"`
	ID     uuid.UUID  `json:"id"`
	Type   string     `json:"type"`
	Status jobs.State `json:"status"`
}

// JobData is what a job received and what it added: its parents'
// results, the jobs it spawned (the first MaxSpawnedShown of
// SpawnedTotal), the job that spawned it, and the batch it belongs to as
// a member (BatchID) or as a callback (CallbackOf, CallbackKind).
type JobData struct {
	Parents      []ParentRef
	Spawned      []SpawnedRef
	SpawnedTotal int
	SpawnedBy    *uuid.UUID
	BatchID      *uuid.UUID
	CallbackOf   *uuid.UUID
	CallbackKind string
}
