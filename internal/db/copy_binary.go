package db

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/bufpool"
	"github.com/flinthq/flint/jobs"
)

// PostgreSQL's binary COPY format, written directly for the tables a
// batch enqueue copies into (jobs, and workflow_steps for a fan-out). pgx's CopyFrom takes every value as an
// interface (thirteen boxed values a job) and looks up an encode plan for
// each; a batch of a thousand jobs spent more of the API's CPU on that and
// on the garbage it left than on anything else in the write. Here a job is
// appended to one buffer with no allocation of its own.

// copyHeader opens a binary COPY stream: the signature, no flags, no
// header extension.
const copyHeader = "PGCOPY\n\xff\r\n\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// copyTrailer ends it: a tuple of -1 fields.
const copyTrailer = "\xff\xff"

// copyJobsSQL is the COPY statement the appended tuples feed: the columns
// appendCopyJob writes, in its order. Every other column takes its
// default, which for a new plain job is what the insert statement sets.
var copyJobsSQL = "COPY jobs (" + strings.Join(copyColumns, ", ") + ") FROM STDIN (FORMAT binary)"

// copyColumns are the columns a COPY batch sets, in appendCopyJob's order.
var copyColumns = []string{"id", "type", "queue", "payload", "priority", "effective_priority", "status",
	"max_retries", "run_at", "timeout_seconds", "created_at", "updated_at", "concurrency_key", "has_parents", "batch_id",
	"traceparent"}

// postgresEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's zero for
// timestamps, in Unix microseconds.
const postgresEpochMicros = 946_684_800_000_000

// appendCopyJob appends j as one tuple of copyColumns.
func appendCopyJob(b []byte, j *jobs.Job) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(copyColumns)))
	b = appendCopyField(b, j.ID[:])
	b = appendCopyText(b, j.Type)
	b = appendCopyText(b, j.Queue)
	// jsonb's binary form is a version byte (1) and the JSON text.
	b = binary.BigEndian.AppendUint32(b, uint32(1+len(j.Payload)))
	b = append(b, 1)
	b = append(b, j.Payload...)
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint16(b, uint16(int16(j.Priority)))
	b = binary.BigEndian.AppendUint32(b, 8)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(j.EffectivePriority))
	b = appendCopyText(b, string(j.Status))
	b = appendCopyInt4(b, int32(j.MaxRetries))
	b = appendCopyTime(b, j.RunAt)
	if j.TimeoutSeconds > 0 {
		b = appendCopyInt4(b, int32(j.TimeoutSeconds))
	} else {
		b = appendCopyNull(b)
	}
	b = appendCopyTime(b, j.CreatedAt)
	b = appendCopyTime(b, j.UpdatedAt)
	if j.ConcurrencyKey != nil {
		b = appendCopyText(b, *j.ConcurrencyKey)
	} else {
		b = appendCopyNull(b)
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	if j.HasParents {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	if j.BatchID != nil {
		b = appendCopyField(b, j.BatchID[:])
	} else {
		b = appendCopyNull(b)
	}
	if j.Traceparent != "" {
		return appendCopyText(b, j.Traceparent)
	}
	return appendCopyNull(b)
}

func appendCopyField(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendCopyText(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendCopyInt4(b []byte, v int32) []byte {
	b = binary.BigEndian.AppendUint32(b, 4)
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

// appendCopyTime appends a timestamptz: microseconds since PostgreSQL's
// epoch.
func appendCopyTime(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixMicro()-postgresEpochMicros))
}

func appendCopyNull(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, math.MaxUint32) // length -1
}

// copyBuffers holds the buffers COPY streams are written in (about 160
// bytes a job with an empty payload), reused from batch to batch.
var copyBuffers bufpool.Pool

// copyStepsSQL is the COPY statement copySteps feeds.
const copyStepsSQL = "COPY workflow_steps (job_id, step_key, workflow_id, spawned_by, reads_spawner) FROM STDIN (FORMAT binary)"

// copySteps writes rows into workflow_steps with one COPY in tx. Through
// insertStepsSQL, 10,000 step rows took about 130 ms, two thirds of it
// encoding and decoding the arrays; copied, about 45 ms.
func copySteps(ctx context.Context, tx pgx.Tx, rows []stepRow) error {
	pooled := copyBuffers.Get()
	defer copyBuffers.Put(pooled)
	b := append((*pooled)[:0], copyHeader...)
	optional := func(b []byte, id uuid.UUID) []byte {
		if id == uuid.Nil {
			return appendCopyNull(b)
		}
		return appendCopyField(b, id[:])
	}
	for i := range rows {
		r := &rows[i]
		b = binary.BigEndian.AppendUint16(b, 5)
		b = appendCopyField(b, r.job[:])
		b = appendCopyText(b, r.key)
		b = optional(b, r.workflow)
		b = optional(b, r.spawner)
		b = binary.BigEndian.AppendUint32(b, 1)
		if r.reads {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	b = append(b, copyTrailer...)
	*pooled = b
	_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(b), copyStepsSQL)
	return err
}
