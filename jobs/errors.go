package jobs

import (
	"errors"
	"fmt"
	"strings"
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
	Op   string // what was asked: "cancel", "retry", "restore", ...
	From State  // the job's state when asked
	// Allowed are the states the operation acts on; empty when Reason
	// explains instead.
	Allowed []State
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

// ValidationError names a request field and says what to fix. The HTTP layer
// turns it into a 422 (or 400 for malformed input) carrying the field.
type ValidationError struct {
	// Field is the request field at fault, in the request's own spelling
	// ("payload", "max_retries", "push.url"); empty when the request as a whole is.
	Field string
	// Message says what is wrong and how to fix it, without the field.
	Message string
}

// Error returns "field: message", or the message alone without a field.
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Invalid returns a *ValidationError for field.
func Invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// cancelError is returned by Cancel.
type cancelError struct{ err error }

func (e *cancelError) Error() string {
	if e.err == nil {
		return "job cancelled by its handler"
	}
	return "job cancelled by its handler: " + e.err.Error()
}
func (e *cancelError) Unwrap() error { return e.err }

// Cancel wraps err so that returning it from a handler cancels the job: the
// work is no longer wanted. A failure that no retry can fix is Permanent.
func Cancel(err error) error { return &cancelError{err: err} }

// permanentError is returned by Permanent.
type permanentError struct{ err error }

func (e *permanentError) Error() string {
	if e.err == nil {
		return "permanent failure"
	}
	return "permanent failure: " + e.err.Error()
}
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that returning it from a handler fails the job for
// good: the remaining retries are skipped and the job goes to the
// dead-letter queue with its reason, where operators look for failures,
// alerts count them and replay starts. Use it for failures that no retry
// can fix (a bad payload, an address the SSRF guard refuses, a recipient
// the mail server rejects).
func Permanent(err error) error { return &permanentError{err: err} }

// IsPermanent reports whether err (or anything it wraps) came from
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// IsCancel reports whether err (or anything it wraps) came from Cancel.
func IsCancel(err error) bool {
	var c *cancelError
	return errors.As(err, &c)
}
