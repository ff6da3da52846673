package domain

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/flinthq/flint/jobs"
)

// Durable execution on the wire (pull workers, push endpoints): the
// steps a job recorded, and the fields of an outcome that sleeps or waits.

// StepsWire is a job's recorded steps as the wire carries them (the
// claim of a pull worker, the body of a push): a JSON object of name →
// result, in the order they were recorded.
type StepsWire []jobs.StepRecord

// MarshalJSON writes the steps as one object, in their order.
func (s StepsWire) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, st := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(st.Name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		if len(st.Result) == 0 {
			b.WriteString("null")
		} else {
			b.Write(st.Result)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// SuspendFields are an outcome's fields for sleeping and waiting.
type SuspendFields struct {
	WakeAt         *string `json:"wake_at"`
	Signal         *string `json:"signal"`
	Event          *string `json:"event"`
	TimeoutSeconds *int64  `json:"timeout_seconds"`
}

// Wait reads a sleeping or waiting outcome's fields (status, with field
// naming them) into what the job waits for; it refuses those fields on
// any other status.
func (o SuspendFields) Wait(status string, field func(string) string, now time.Time) (*jobs.WaitingFor, error) {
	switch status {
	case "sleeping":
		if o.Signal != nil || o.Event != nil || o.TimeoutSeconds != nil {
			return nil, jobs.Invalid(field("signal"), "a sleeping outcome gives wake_at only")
		}
		if o.WakeAt == nil {
			return nil, jobs.Invalid(field("wake_at"), "is required for a sleeping outcome: when to run the job again (RFC 3339)")
		}
		at, err := time.Parse(time.RFC3339Nano, *o.WakeAt)
		if err != nil {
			return nil, jobs.Invalid(field("wake_at"), "must be an RFC 3339 time, like 2026-12-24T18:00:00Z")
		}
		if at.After(now.Add(jobs.MaxWait)) {
			return nil, jobs.Invalid(field("wake_at"), "is more than %d days ahead", int(jobs.MaxWait.Hours()/24))
		}
		return &jobs.WaitingFor{Kind: jobs.WaitSleep, Until: at}, nil
	case "waiting":
		if o.WakeAt != nil {
			return nil, jobs.Invalid(field("wake_at"), "applies to sleeping outcomes; a wait ends at its timeout_seconds")
		}
		w := &jobs.WaitingFor{Kind: jobs.WaitSignal}
		switch {
		case o.Signal != nil && o.Event != nil:
			return nil, jobs.Invalid(field("event"), "a job waits for a signal or for an event, not both")
		case o.Signal != nil:
			w.Name = *o.Signal
		case o.Event != nil:
			w.Kind, w.Name = jobs.WaitEvent, *o.Event
		default:
			return nil, jobs.Invalid(field("signal"), "a waiting outcome names the signal (or the event) it waits for")
		}
		if err := jobs.CheckSignalName(field(w.Kind), w.Name); err != nil {
			return nil, err
		}
		timeout := jobs.MaxWait
		if o.TimeoutSeconds != nil {
			if err := CheckWaitTimeout(field("timeout_seconds"), *o.TimeoutSeconds); err != nil {
				return nil, err
			}
			if *o.TimeoutSeconds > 0 {
				timeout = time.Duration(*o.TimeoutSeconds) * time.Second
			}
		}
		w.Until = now.Add(timeout)
		return w, nil
	}
	for name, set := range map[string]bool{"wake_at": o.WakeAt != nil, "signal": o.Signal != nil,
		"event": o.Event != nil, "timeout_seconds": o.TimeoutSeconds != nil} {
		if set {
			return nil, jobs.Invalid(field(name), "applies to sleeping and waiting outcomes only")
		}
	}
	return nil, nil
}

// explainWaiting says what a waiting job needs to run again.
func explainWaiting(f ExplainFacts) Reason {
	j := f.Job
	w := j.WaitingFor
	if w == nil {
		return Reason{Code: "waiting", Message: "Waiting between runs; it holds no worker."}
	}
	if !w.Until.After(f.Now) {
		return reasonAt("wait_over", w.Until, "Its wait ended at %s; the scheduler queues it within moments.", stamp(w.Until))
	}
	in := w.Until.Sub(f.Now).Round(time.Second)
	switch w.Kind {
	case jobs.WaitSleep:
		return reasonAt("sleeping", w.Until, "Sleeping (step %q) until %s (in %s); it holds no worker and resumes after its recorded steps.",
			w.Name, stamp(w.Until), in)
	case jobs.WaitEvent:
		return reasonAt("waiting_for_event", w.Until, "Waiting for the event %q (POST /api/v1/events with this name) until %s (in %s); "+
			"then it runs again, timed out. It holds no worker.", w.Name, stamp(w.Until), in)
	}
	return reasonAt("waiting_for_signal", w.Until, "Waiting for the signal %q (POST /api/v1/jobs/%s/signals/%s, or Send signal on its page) "+
		"until %s (in %s); then it runs again, timed out. It holds no worker.", w.Name, j.ID, w.Name, stamp(w.Until), in)
}
