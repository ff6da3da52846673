package jobs

import (
	"context"
	"log/slog"
)

type loggerKey struct{}

// LoggerSource makes a running job's logger when its handler first asks
// for it, so that handlers that do not log cost nothing.
type LoggerSource interface {
	// JobLogger returns the job's logger, the same one on every call.
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
