package jobs

import (
	"errors"
	"fmt"
)

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
