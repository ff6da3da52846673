package domain

import (
	"strconv"

	"github.com/flinthq/flint/internal/jsonutil"
)

// AppendJSON appends e as JSON.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"job_id":`...)
	b = jsonutil.AppendUUID(b, e.JobID)
	b = append(b, `,"status":`...)
	b = jsonutil.AppendString(b, string(e.Status))
	b = append(b, `,"type":`...)
	b = jsonutil.AppendString(b, e.Type)
	b = append(b, `,"queue":`...)
	b = jsonutil.AppendString(b, e.Queue)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, `,"at":`...)
	b = jsonutil.AppendTime(b, e.At)
	if e.Progress != nil {
		b = append(b, `,"progress":`...)
		b = strconv.AppendInt(b, int64(*e.Progress), 10)
	}
	if e.ProgressMessage != nil {
		b = append(b, `,"progress_message":`...)
		b = jsonutil.AppendString(b, *e.ProgressMessage)
	}
	if e.BatchID != nil {
		b = append(b, `,"batch_id":`...)
		b = jsonutil.AppendUUID(b, *e.BatchID)
	}
	if e.Kind != "" {
		b = append(b, `,"kind":`...)
		b = jsonutil.AppendString(b, e.Kind)
	}
	return append(b, '}')
}
