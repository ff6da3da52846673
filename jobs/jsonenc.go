package jobs

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// Hand-written JSON for the two values Flint encodes by the thousand: the
// jobs a batch enqueue returns and the events every change publishes.
// encoding/json spends most of its time on reflection and on compacting
// what it wrote; these append the same bytes directly. They produce exactly
// what json.Encoder with SetEscapeHTML(false) produces (jsonenc_test.go
// holds them to that, field by field), so a field added to Job or Event
// without a line here fails the test.

// AppendJSON appends e as JSON.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"job_id":`...)
	b = appendUUID(b, e.JobID)
	b = append(b, `,"status":`...)
	b = appendString(b, string(e.Status))
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"queue":`...)
	b = appendString(b, e.Queue)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, `,"at":`...)
	b = appendTime(b, e.At)
	if e.Progress != nil {
		b = append(b, `,"progress":`...)
		b = strconv.AppendInt(b, int64(*e.Progress), 10)
	}
	if e.ProgressMessage != nil {
		b = append(b, `,"progress_message":`...)
		b = appendString(b, *e.ProgressMessage)
	}
	if e.BatchID != nil {
		b = append(b, `,"batch_id":`...)
		b = appendUUID(b, *e.BatchID)
	}
	if e.Kind != "" {
		b = append(b, `,"kind":`...)
		b = appendString(b, e.Kind)
	}
	return append(b, '}')
}

// AppendJSON appends j as JSON.
func (j *Job) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendUUID(b, j.ID)
	b = append(b, `,"type":`...)
	b = appendString(b, j.Type)
	b = append(b, `,"queue":`...)
	b = appendString(b, j.Queue)
	b = append(b, `,"payload":`...)
	b = appendRaw(b, j.Payload)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	b = append(b, `,"effective_priority":`...)
	b = appendFloat(b, j.EffectivePriority)
	b = append(b, `,"status":`...)
	b = appendString(b, string(j.Status))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"max_retries":`...)
	b = strconv.AppendInt(b, int64(j.MaxRetries), 10)
	b = append(b, `,"interruptions":`...)
	b = strconv.AppendInt(b, int64(j.Interruptions), 10)
	b = append(b, `,"executions":`...)
	b = strconv.AppendInt(b, int64(j.Executions), 10)
	b = append(b, `,"run_at":`...)
	b = appendTime(b, j.RunAt)
	if j.TimeoutSeconds != 0 {
		b = append(b, `,"timeout_seconds":`...)
		b = strconv.AppendInt(b, int64(j.TimeoutSeconds), 10)
	}
	if j.IdempotencyKey != nil {
		b = append(b, `,"idempotency_key":`...)
		b = appendString(b, *j.IdempotencyKey)
	}
	if j.ConcurrencyKey != nil {
		b = append(b, `,"concurrency_key":`...)
		b = appendString(b, *j.ConcurrencyKey)
	}
	b = append(b, `,"cancel_requested":`...)
	b = strconv.AppendBool(b, j.CancelRequested)
	if j.LastError != nil {
		b = append(b, `,"last_error":`...)
		b = appendString(b, *j.LastError)
	}
	if len(j.Result) > 0 {
		b = append(b, `,"result":`...)
		b = appendRaw(b, j.Result)
	}
	if j.WorkerID != nil {
		b = append(b, `,"worker_id":`...)
		b = appendString(b, *j.WorkerID)
	}
	b = appendOptTime(b, `,"lease_expires_at":`, j.LeaseExpiresAt)
	if j.ScheduleID != nil {
		b = append(b, `,"schedule_id":`...)
		b = appendUUID(b, *j.ScheduleID)
	}
	b = appendOptTime(b, `,"scheduled_for":`, j.ScheduledFor)
	if j.CancelledBy != nil {
		b = append(b, `,"cancelled_by":`...)
		b = appendUUID(b, *j.CancelledBy)
	}
	if j.Progress != nil {
		b = append(b, `,"progress":`...)
		b = strconv.AppendInt(b, int64(*j.Progress), 10)
	}
	if j.ProgressMessage != nil {
		b = append(b, `,"progress_message":`...)
		b = appendString(b, *j.ProgressMessage)
	}
	b = j.appendTimes(b)
	if j.BatchID != nil {
		b = append(b, `,"batch_id":`...)
		b = appendUUID(b, *j.BatchID)
	}
	if j.WaitingFor != nil {
		b = appendWaitingFor(b, j.WaitingFor)
	}
	return append(b, '}')
}

// appendWaitingFor appends a waiting job's "waiting_for".
func appendWaitingFor(b []byte, w *WaitingFor) []byte {
	b = append(b, `,"waiting_for":{"kind":`...)
	b = appendString(b, w.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, w.Name)
	b = append(b, `,"until":`...)
	b = appendTime(b, w.Until)
	return append(b, '}')
}

// appendTimes appends j's lifecycle timestamps, from created_at on.
func (j *Job) appendTimes(b []byte) []byte {
	b = append(b, `,"created_at":`...)
	b = appendTime(b, j.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, j.UpdatedAt)
	b = appendOptTime(b, `,"started_at":`, j.StartedAt)
	b = appendOptTime(b, `,"finished_at":`, j.FinishedAt)
	return appendOptTime(b, `,"deleted_at":`, j.DeletedAt)
}

func appendUUID(b []byte, id uuid.UUID) []byte {
	b = append(b, '"')
	var s [36]byte
	// uuid.UUID's MarshalText writes into a fresh slice; encode in place.
	const hexd = "0123456789abcdef"
	p := 0
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[p] = '-'
			p++
		}
		s[p], s[p+1] = hexd[c>>4], hexd[c&0xf]
		p += 2
	}
	b = append(b, s[:]...)
	return append(b, '"')
}

// appendString quotes s. Strings that need no escaping (type and queue
// names, ids, most messages) are copied; others go through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTime writes t as time.Time's MarshalJSON does.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		enc, err := json.Marshal(t)
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, enc...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func appendOptTime(b []byte, key string, t *time.Time) []byte {
	if t == nil {
		return b
	}
	return appendTime(append(b, key...), *t)
}

// appendFloat writes f as encoding/json does: shortest decimal, no
// exponent in the range where encoding/json uses none.
func appendFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); f == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	enc, err := json.Marshal(f)
	if err != nil {
		return append(b, '0')
	}
	return append(b, enc...)
}

// appendRaw writes a stored JSON document compacted, as encoding/json
// writes a json.RawMessage; one that is not valid JSON becomes null rather
// than breaking the document around it.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return append(b, "null"...)
	}
	return buf.Bytes()
}
