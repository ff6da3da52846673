package db

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/jackc/pgx/v5"
)

// Statements the external tests inspect.
const (
	ClaimSQL            = claimSQL
	ClaimQueuesSQL      = claimQueuesSQL
	ClaimLimitedSQL     = claimLimitedSQL
	ClaimLimitedLockSQL = claimLimitedLockSQL
	LockChildrenSQL     = lockChildrenSQL
	ReleaseChildrenSQL  = releaseChildrenSQL
	MaxParentsBytesSQL  = maxParentsBytesSQL
	ParentsOfSQL        = parentsOfSQL
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

// CheckBreaking is checkPending for one migration named name whose file
// holds text, as migrate runs it before applying anything.
func CheckBreaking(ctx context.Context, conn *pgx.Conn, name, text string, force bool) error {
	m := migration{name: name, breaksBefore: breaksBefore(text)}
	return checkPending(ctx, conn, []migration{m}, force, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// ParseSemver and SemverLess expose the version order of migrate_breaks.go.
func ParseSemver(s string) (semver, bool) { return parseSemver(s) }

// SemverLess reports whether a is older than b.
func SemverLess(a, b semver) bool { return a.less(b) }

// SignalsQueued is how many signals wait for a free signal flusher.
func (s *Store) SignalsQueued() int { return len(s.signals.in) }

// What pins a statement's plan, and the signals' statement.
const (
	PinPlanSQL     = pinPlanSQL
	ParentsPlanSQL = parentsPlanSQL
	SignalBatchSQL = signalBatchSQL
)
