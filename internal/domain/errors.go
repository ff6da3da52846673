package domain

import (
	"errors"
	"fmt"
	"strings"

	"github.com/flinthq/flint/jobs"
)

var (
	// ErrNotFound means no job (or no job outside the bin, as the call says)
	// has the given id.
	ErrNotFound = errors.New("job not found")
	// ErrInvalidTransition means the job's state does not allow the
	// requested move; see TransitionError for the detail.
	ErrInvalidTransition = errors.New("invalid state transition")
	// ErrLeaseLost means a worker's lease token no longer matches the job:
	// the lease expired and the job was reaped or claimed by another worker.
	// The worker must stop and write nothing.
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnknownType means no handler is registered for a job type.
	ErrUnknownType = errors.New("unknown job type")
)

// TransitionError says why an operation was refused for a job's state.
// errors.Is(err, ErrInvalidTransition) holds for it.
type TransitionError struct {
	Op   string     // what was asked: "cancel", "retry", "restore", ...
	From jobs.State // the job's state when asked
	// Allowed are the states the operation acts on; empty when Reason
	// explains instead.
	Allowed []jobs.State
	Reason  string // optional extra explanation
}

// Error says what was refused and why: the Reason when set, or else the
// states the operation is allowed from.
func (e *TransitionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cannot %s a job that is %s", e.Op, e.From)
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	} else if len(e.Allowed) > 0 {
		parts := make([]string, len(e.Allowed))
		for i, s := range e.Allowed {
			parts[i] = string(s)
		}
		fmt.Fprintf(&b, " (allowed from: %s)", strings.Join(parts, ", "))
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }
