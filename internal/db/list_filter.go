package db

import (
	"slices"
	"strings"

	"github.com/flinthq/flint/jobs"
)

// statuses adds the condition on the listed states. A claimed job is a
// running row without started_at (jobs.StateClaimed): asked for one of
// the two and not the other, the listing tells them apart.
func (q *listQuery) statuses(states []jobs.State) {
	stored := make([]jobs.State, 0, len(states))
	for _, s := range states {
		if !slices.Contains(stored, s.Stored()) {
			stored = append(stored, s.Stored())
		}
	}
	switch len(stored) {
	case 0:
	case 1:
		q.where = append(q.where, "status = "+q.arg(string(stored[0])))
	default:
		q.where = append(q.where, "status = ANY("+q.arg(stateStrings(stored))+"::text[])")
	}
	claimed, running := slices.Contains(states, jobs.StateClaimed), slices.Contains(states, jobs.StateRunning)
	switch {
	case claimed && !running:
		q.where = append(q.where, "(status <> 'running' OR started_at IS NULL)")
	case running && !claimed:
		q.where = append(q.where, "(status <> 'running' OR started_at IS NOT NULL)")
	}
}

// isShortID reports whether text is eight hex digits, as domain.ShortID
// prints.
func isShortID(text string) bool {
	if len(text) != 8 {
		return false
	}
	for _, r := range text {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}
