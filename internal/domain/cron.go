package domain

import "time"

// NextInterval returns the first time after now on the grid last + k×every
// (k ≥ 1): a series that missed occurrences while no scheduler ran resumes
// on its grid with one run, not a burst of catch-up runs.
func NextInterval(last, now time.Time, every time.Duration) time.Time {
	next := last.Add(every)
	if !next.After(now) {
		missed := now.Sub(last) / every
		next = last.Add((missed + 1) * every)
		for !next.After(now) {
			next = next.Add(every)
		}
	}
	return next
}
