package jobs

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
)

// MaxProgressMessage caps a progress message, in bytes.
const MaxProgressMessage = 200

// ProgressReporter receives a running job's progress. The worker pool puts
// one in each handler's context.
type ProgressReporter interface {
	ReportProgress(percent int, message string)
}

type progressKey struct{}

// WithProgress returns ctx carrying r.
func WithProgress(ctx context.Context, r ProgressReporter) context.Context {
	return context.WithValue(ctx, progressKey{}, r)
}

// ReportProgress tells how far the running job has come: percent is
// clamped to 0-100 and message cut to MaxProgressMessage bytes. It is
// shown on the job page and in the jobs list, returned by the API and
// carried in events; it is written with the next heartbeat, within about a
// second. Outside a worker (a handler called directly in a test) it does
// nothing.
func ReportProgress(ctx context.Context, percent int, message string) {
	r, ok := ctx.Value(progressKey{}).(ProgressReporter)
	if !ok {
		return
	}
	r.ReportProgress(min(max(percent, 0), 100), TruncateBytes(strings.TrimSpace(message), MaxProgressMessage, "…"))
}

// LogEntry is one line of a job's own log: what its handler logged through
// Logger, or a lifecycle line of Flint's.
type LogEntry struct {
	JobID   uuid.UUID      `json:"job_id"`
	Seq     int64          `json:"seq"`
	Attempt int            `json:"attempt"`
	At      time.Time      `json:"at"`
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Attrs   map[string]any `json:"attrs,omitempty"`
	// Source is "handler" for what the job's handler logged, "flint" for
	// the lifecycle lines Flint derives from its runs (Seq 0).
	Source string `json:"source"`
}

// MaxJobLogLines caps what one attempt of a job stores in its log; later
// lines are counted and dropped, and one line says how many.
const MaxJobLogLines = 1000

type loggerKey struct{}

// LoggerSource makes a running job's logger when its handler first asks
// for it, so that handlers that do not log cost nothing.
type LoggerSource interface {
	JobLogger() *slog.Logger
}

// WithLogger returns ctx carrying the source of the job's logger.
func WithLogger(ctx context.Context, src LoggerSource) context.Context {
	return context.WithValue(ctx, loggerKey{}, src)
}

// Logger returns the running job's logger: what a handler logs through it
// is stored with the job and attempt (shown on the job page, returned by
// GET /api/v1/jobs/{id}/logs) and goes to the process log too. Outside a
// worker it returns slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	if src, ok := ctx.Value(loggerKey{}).(LoggerSource); ok {
		return src.JobLogger()
	}
	return slog.Default()
}
