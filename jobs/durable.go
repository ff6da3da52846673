package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// MaxStepNameBytes bounds a step's name (and a sleep's).
const MaxStepNameBytes = 200

// MaxSignalNameBytes bounds the name of a signal or an event.
const MaxSignalNameBytes = 200

// MaxStepResultBytes bounds a step's recorded result, in bytes of JSON.
const MaxStepResultBytes = MaxResultBytes

// MaxWait is the longest a job may sleep or wait in one go; a wait
// without a timeout ends (timed out) after it.
const MaxWait = 366 * 24 * time.Hour

// Wait kinds: what a waiting job waits for.
const (
	WaitSleep  = "sleep"
	WaitSignal = "signal"
	WaitEvent  = "event"
)

// StepRecord is a step a job recorded (Step, Sleep): a row of job_steps.
type StepRecord struct {
	Name string `json:"name"`
	// Seq numbers the job's steps from 1 in the order they were recorded.
	Seq int `json:"seq"`
	// Attempt is the attempt that ran the step.
	Attempt int `json:"attempt"`
	// Result is what the step returned, as JSON (null for nothing); a
	// sleep's is {"wake_at": time}.
	Result     json.RawMessage `json:"result"`
	StartedAt  time.Time       `json:"started_at"`
	RecordedAt time.Time       `json:"recorded_at"`
}

// Duration is how long the step ran before it was recorded.
func (r StepRecord) Duration() time.Duration { return r.RecordedAt.Sub(r.StartedAt) }

// Signal is what resumed a wait: a signal's or an event's body, or a
// timeout (TimedOut, with no body).
type Signal struct {
	Body     json.RawMessage `json:"body,omitempty"`
	At       *time.Time      `json:"at,omitempty"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// Decode decodes the signal's body into v.
func (s Signal) Decode(v any) error {
	if s.TimedOut {
		return errors.New("the wait timed out: no signal body to decode")
	}
	if len(s.Body) == 0 {
		return json.Unmarshal([]byte("null"), v)
	}
	return json.Unmarshal(s.Body, v)
}

// WaitingFor says what a waiting job waits for: a sleep (Name is its
// step), a signal or an event by name; Until is when the wait ends (the
// wake time, or the timeout).
type WaitingFor struct {
	Kind  string    `json:"kind"`
	Name  string    `json:"name"`
	Until time.Time `json:"until"`
}

// SuspendError is returned by Sleep, WaitForSignal and WaitForEvent when
// the job must wait: the handler returns it (wrapped or not), and its
// worker ends the attempt without charging it. The job then waits, with
// no worker, goroutine or connection held, until Until or until what it
// waits for arrives, and runs again with its recorded steps.
type SuspendError struct {
	Wait WaitingFor
	// Step is the sleep's step to record with the suspension (nil for a
	// signal or event wait).
	Step *StepRecord
}

// Error says what the job waits for.
func (e *SuspendError) Error() string {
	return fmt.Sprintf("job waits (%s %q) until %s", e.Wait.Kind, e.Wait.Name, e.Wait.Until.UTC().Format(time.RFC3339))
}

// StepOrderError says that the handler's steps do not match what earlier
// attempts recorded: the code changed the order or the names of its
// steps between attempts. Flint does not guess which recorded result
// belongs where: the job fails for good with this error, and a replay
// that starts over (dropping the recorded steps) runs it with the new code.
type StepOrderError struct {
	JobID    uuid.UUID
	Seq      int    // the position at which they differ
	Recorded string // the step recorded at Seq ("" when none)
	Asked    string // the step the handler asked for at Seq
}

// Error names both steps.
func (e *StepOrderError) Error() string {
	if e.Recorded == "" {
		return fmt.Sprintf("step order changed: step %q (number %d) was recorded earlier as a later step; "+
			"the code changed the order of its steps since an earlier attempt", e.Asked, e.Seq)
	}
	return fmt.Sprintf("step order changed: step number %d is %q in the recorded history but the code asked for %q; "+
		"the code changed the order or the names of its steps since an earlier attempt (replay with \"start over\" to run it anew)",
		e.Seq, e.Recorded, e.Asked)
}

// CheckStepName validates a step's (or a sleep's) name for field.
func CheckStepName(field, name string) error {
	switch {
	case name == "":
		return Invalid(field, "is required")
	case len(name) > MaxStepNameBytes:
		return Invalid(field, "is %d bytes; the limit is %d", len(name), MaxStepNameBytes)
	case !utf8.ValidString(name):
		return Invalid(field, "must be valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return Invalid(field, "must not contain control characters")
		}
	}
	return nil
}

// CheckSignalName validates the name of a signal or an event for field:
// 1 to 200 bytes of letters, digits and . _ : - (it travels in URL paths).
func CheckSignalName(field, name string) error {
	if name == "" {
		return Invalid(field, "is required")
	}
	if len(name) > MaxSignalNameBytes {
		return Invalid(field, "is %d bytes; the limit is %d", len(name), MaxSignalNameBytes)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == ':' || r == '-'
		if !ok {
			return Invalid(field, "may hold only letters, digits and . _ : - (got %q)", r)
		}
	}
	return nil
}
