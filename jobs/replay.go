package jobs

import "encoding/json"

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
