package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/stretchr/testify/require"
)

// waitFor polls cond until it holds, failing the test after timeout. cond
// runs on the test's goroutine, so it may use require.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, timeout, func() (bool, string) { return cond(), what })
}

// waitUntil is waitFor for a condition that says how things stand: cond
// returns whether it holds and, for the failure message, what it waits for
// and what it saw last.
func waitUntil(t testing.TB, timeout time.Duration, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, state)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval
	}
}

// pollUntil polls cond every interval until it holds or timeout passes,
// and reports whether it held: for waits whose outcome is counted rather
// than required.
func pollUntil(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every) // the poll interval
	}
	return true
}

// waitAllCompleted waits until total jobs in the database have completed,
// failing with the count by state after timeout.
func waitAllCompleted(t testing.TB, s *db.Store, total int, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	waitUntil(t, timeout, func() (bool, string) {
		var done int
		require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'completed'`).Scan(&done))
		if done == total {
			return true, ""
		}
		var states []byte
		_ = s.Pool().QueryRow(ctx, `SELECT json_object_agg(status, n)::text FROM (SELECT status, count(*) n FROM jobs GROUP BY status) x`).Scan(&states)
		return false, fmt.Sprintf("all %d jobs to complete (%d did; states %s)", total, done, states)
	})
}
