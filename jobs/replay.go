package jobs

import "encoding/json"

// ReplayFrom are the states whose payload an operator may edit before a
// replay: the dead-letter queue only. A running job's handler holds the
// payload it started with, and a waiting job is better cancelled and
// enqueued anew.
var ReplayFrom = []State{StateDeadLetter}

// AuditEditReplay is the audit action of an edit and replay; its details
// hold payload_before and payload_after.
const AuditEditReplay = "edit_replay"

// CheckPayload validates a payload for a job of type typ as an enqueue
// would (a JSON object within the size limit, no NUL, and whatever the
// type's handler requires) and returns it trimmed.
func (r *Registry) CheckPayload(typ string, payload json.RawMessage) (json.RawMessage, error) {
	p := EnqueueParams{Type: typ, Payload: payload}
	if err := validatePayload(&p); err != nil {
		return nil, err
	}
	if h, ok := r.Lookup(typ); ok {
		if v, ok := h.(PayloadValidator); ok {
			if err := v.ValidatePayload(p.Payload); err != nil {
				return nil, Invalid("payload", "%s", err.Error())
			}
		}
	}
	return p.Payload, nil
}
