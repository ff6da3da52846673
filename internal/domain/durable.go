package domain

import (
	"errors"
	"time"

	"github.com/flinthq/flint/jobs"
)

// MaxSignalBodyBytes bounds the body a signal or an event carries.
const MaxSignalBodyBytes = 64 << 10

// OutcomeSuspended means the handler slept or waited (Sleep,
// WaitForSignal, WaitForEvent): the attempt ended without charging a
// retry and the job waits, holding no worker, until it is woken.
const OutcomeSuspended Outcome = "suspended"

// AsSuspend returns the *SuspendError err carries, if any.
func AsSuspend(err error) (*jobs.SuspendError, bool) {
	var s *jobs.SuspendError
	ok := errors.As(err, &s)
	return s, ok
}

// CheckWaitTimeout validates a wait's timeout in seconds for field (0: the
// longest, MaxWait).
func CheckWaitTimeout(field string, seconds int64) error {
	if seconds < 0 || seconds > int64(jobs.MaxWait/time.Second) {
		return jobs.Invalid(field, "must be between 1 and %d seconds (0 or absent: %d)", int64(jobs.MaxWait/time.Second), int64(jobs.MaxWait/time.Second))
	}
	return nil
}
