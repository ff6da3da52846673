package jobs

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/flinthq/flint/internal/jsonutil"
)

// Hand-written JSON for the two values Flint encodes by the thousand: the
// jobs a batch enqueue returns and the events every change publishes.
// encoding/json spends most of its time on reflection and on compacting
// what it wrote; these append the same bytes directly. They produce exactly
// what json.Encoder with SetEscapeHTML(false) produces (jsonenc_test.go
// holds them to that, field by field), so a field added to Job or Event
// without a line here fails the test.

// AppendJSON appends j as JSON.
func (j *Job) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonutil.AppendUUID(b, j.ID)
	b = append(b, `,"type":`...)
	b = jsonutil.AppendString(b, j.Type)
	b = append(b, `,"queue":`...)
	b = jsonutil.AppendString(b, j.Queue)
	b = append(b, `,"payload":`...)
	b = appendRaw(b, j.Payload)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	b = append(b, `,"effective_priority":`...)
	b = appendFloat(b, j.EffectivePriority)
	b = append(b, `,"status":`...)
	b = jsonutil.AppendString(b, string(j.Status))
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(j.Attempt), 10)
	b = append(b, `,"max_retries":`...)
	b = strconv.AppendInt(b, int64(j.MaxRetries), 10)
	b = append(b, `,"interruptions":`...)
	b = strconv.AppendInt(b, int64(j.Interruptions), 10)
	b = append(b, `,"executions":`...)
	b = strconv.AppendInt(b, int64(j.Executions), 10)
	b = append(b, `,"run_at":`...)
	b = jsonutil.AppendTime(b, j.RunAt)
	if j.TimeoutSeconds != 0 {
		b = append(b, `,"timeout_seconds":`...)
		b = strconv.AppendInt(b, int64(j.TimeoutSeconds), 10)
	}
	if j.IdempotencyKey != nil {
		b = append(b, `,"idempotency_key":`...)
		b = jsonutil.AppendString(b, *j.IdempotencyKey)
	}
	if j.ConcurrencyKey != nil {
		b = append(b, `,"concurrency_key":`...)
		b = jsonutil.AppendString(b, *j.ConcurrencyKey)
	}
	b = append(b, `,"cancel_requested":`...)
	b = strconv.AppendBool(b, j.CancelRequested)
	if j.LastError != nil {
		b = append(b, `,"last_error":`...)
		b = jsonutil.AppendString(b, *j.LastError)
	}
	if len(j.Result) > 0 {
		b = append(b, `,"result":`...)
		b = appendRaw(b, j.Result)
	}
	if j.WorkerID != nil {
		b = append(b, `,"worker_id":`...)
		b = jsonutil.AppendString(b, *j.WorkerID)
	}
	b = appendOptTime(b, `,"lease_expires_at":`, j.LeaseExpiresAt)
	if j.ScheduleID != nil {
		b = append(b, `,"schedule_id":`...)
		b = jsonutil.AppendUUID(b, *j.ScheduleID)
	}
	b = appendOptTime(b, `,"scheduled_for":`, j.ScheduledFor)
	if j.CancelledBy != nil {
		b = append(b, `,"cancelled_by":`...)
		b = jsonutil.AppendUUID(b, *j.CancelledBy)
	}
	if j.Progress != nil {
		b = append(b, `,"progress":`...)
		b = strconv.AppendInt(b, int64(*j.Progress), 10)
	}
	if j.ProgressMessage != nil {
		b = append(b, `,"progress_message":`...)
		b = jsonutil.AppendString(b, *j.ProgressMessage)
	}
	b = j.appendTimes(b)
	if j.BatchID != nil {
		b = append(b, `,"batch_id":`...)
		b = jsonutil.AppendUUID(b, *j.BatchID)
	}
	if j.WaitingFor != nil {
		b = appendWaitingFor(b, j.WaitingFor)
	}
	return append(b, '}')
}

// appendWaitingFor appends a waiting job's "waiting_for".
func appendWaitingFor(b []byte, w *WaitingFor) []byte {
	b = append(b, `,"waiting_for":{"kind":`...)
	b = jsonutil.AppendString(b, w.Kind)
	b = append(b, `,"name":`...)
	b = jsonutil.AppendString(b, w.Name)
	b = append(b, `,"until":`...)
	b = jsonutil.AppendTime(b, w.Until)
	return append(b, '}')
}

// appendTimes appends j's lifecycle timestamps, from created_at on.
func (j *Job) appendTimes(b []byte) []byte {
	b = append(b, `,"created_at":`...)
	b = jsonutil.AppendTime(b, j.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = jsonutil.AppendTime(b, j.UpdatedAt)
	b = appendOptTime(b, `,"started_at":`, j.StartedAt)
	b = appendOptTime(b, `,"finished_at":`, j.FinishedAt)
	return appendOptTime(b, `,"deleted_at":`, j.DeletedAt)
}

func appendOptTime(b []byte, key string, t *time.Time) []byte {
	if t == nil {
		return b
	}
	return jsonutil.AppendTime(append(b, key...), *t)
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
