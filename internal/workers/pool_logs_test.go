package workers_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// recordingHandler keeps the records logged through it.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// levelOf returns the level of the first record with msg, and whether
// there was one.
func (h *recordingHandler) levelOf(msg string) (slog.Level, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message == msg {
			return r.Level, true
		}
	}
	return 0, false
}

// TestPoolLogsFailuresAtTheirLevel: a failure that will be retried is a
// warning in the process log, and the one that sends the job to the
// dead-letter queue an error, so an operator filtering the log by error
// finds every job that needs them.
func TestPoolLogsFailuresAtTheirLevel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recordingHandler{}
	j := b.enqueue(t, jobs.TypeFail, `{"message": "boom"}`, func(p *jobs.EnqueueParams) { p.MaxRetries = ptr(1) })
	pool := workers.NewPool(workers.Config{WorkerID: "levels", Workers: 1, PollInterval: 20 * time.Millisecond},
		b.store, b.registry, slog.New(rec))
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateScheduled))
	require.Eventually(t, func() bool { _, ok := rec.levelOf("job failed; it will be retried"); return ok }, 10*time.Second, 10*time.Millisecond)
	lvl, _ := rec.levelOf("job failed; it will be retried")
	require.Equal(t, slog.LevelWarn, lvl)
	_, early := rec.levelOf("job failed for good: moved to the dead-letter queue")
	require.False(t, early, "the first failure has a retry left")

	_, err := b.store.RetryJob(b.ctx, j.ID) // run the retry now
	require.NoError(t, err)
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Eventually(t, func() bool {
		_, ok := rec.levelOf("job failed for good: moved to the dead-letter queue")
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	lvl, _ = rec.levelOf("job failed for good: moved to the dead-letter queue")
	require.Equal(t, slog.LevelError, lvl)
}
