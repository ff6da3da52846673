package db

import (
	"bytes"
	"errors"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
)

// inLockOrder returns rows sorted by the job id each names (a sorted copy;
// rows itself is left as it was). Statements that update many running
// jobs from an input array (a heartbeat's lease extensions, a batch of
// finishes) lock the rows in the array's order; two such statements over
// overlapping rows in different orders, such as a worker's heartbeat and
// its own batched finish, would each wait for a row the other holds, and
// PostgreSQL would end one with a deadlock error. In id order they only
// ever wait for each other one way, as long as the plan reads the array
// in order; a plan that reads jobs first (a hash join on a table the
// statistics call small) does not, so retryDeadlocks stands behind it.
func inLockOrder[T any](rows []T, id func(T) uuid.UUID) []T {
	if slices.IsSortedFunc(rows, func(a, b T) int { return compareIDs(id(a), id(b)) }) {
		return rows
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b T) int { return compareIDs(id(a), id(b)) })
	return sorted
}

// compareIDs orders job ids as PostgreSQL orders uuid values: bytewise.
func compareIDs(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }

// maxDeadlockRetries is how many times retryDeadlocks runs a statement
// again after PostgreSQL ended it to break a deadlock.
const maxDeadlockRetries = 3

// retryDeadlocks runs attempt, and again (up to maxDeadlockRetries times)
// while it fails with a deadlock (SQLSTATE 40P01). PostgreSQL rolls the
// chosen statement back whole, so running it again is safe for a single
// statement or an implicit transaction (a pipeline): a heartbeat or a
// finish that lost a deadlock is applied by the retry, not answered 500.
func retryDeadlocks(attempt func() error) error {
	for try := 0; ; try++ {
		err := attempt()
		var pg *pgconn.PgError
		if err == nil || try == maxDeadlockRetries || !errors.As(err, &pg) || pg.Code != "40P01" {
			return err
		}
	}
}
