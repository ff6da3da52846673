package jobs

import (
	"context"
	"strings"
)

// MaxProgressMessage caps a progress message, in bytes.
const MaxProgressMessage = 200

// ProgressReporter receives a running job's progress. The worker pool puts
// one in each handler's context.
type ProgressReporter interface {
	// ReportProgress records the latest progress; ReportProgress (the
	// function) has already clamped percent and cut message.
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
