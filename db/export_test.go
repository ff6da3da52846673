package db

import (
	"context"
	"time"

	"github.com/flinthq/flint/jobs"
)

// Statements the external tests inspect.
const (
	ClaimLimitedSQL     = claimLimitedSQL
	ClaimLimitedLockSQL = claimLimitedLockSQL
	LockChildrenSQL     = lockChildrenSQL
	ReleaseChildrenSQL  = releaseChildrenSQL
	MaxParentsBytesSQL  = maxParentsBytesSQL
)

// ArchiveSQL moves finished jobs to the history; ArchiveArgs are its
// arguments for one state, moving what finished before now.
const ArchiveSQL = archiveSQL

func ArchiveArgs(state string, now time.Time, days []time.Time, limit int) []any {
	return []any{state, uuidV7Floor(now), now, days, limit}
}

// EnsureHistoryPartitions creates the day partitions of state for days.
func (s *Store) EnsureHistoryPartitions(ctx context.Context, state string, days []time.Time) error {
	return s.ensureHistoryPartitions(ctx, jobs.State(state), days)
}
