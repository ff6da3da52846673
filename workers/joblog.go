package workers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flinthq/flint/jobs"
)

// jobLogBatch is the most lines one insert writes; jobLogLinger is how long
// the writer waits for more after the first line of a batch.
const (
	jobLogBatch   = 500
	jobLogLinger  = 100 * time.Millisecond
	jobLogBacklog = 20_000
)

// jobLogWriter stores job log lines in batches, off the handlers' path: a
// handler's log call only puts the line on a channel. When the channel is
// full (the database is slow or gone), lines are dropped and counted.
type jobLogWriter struct {
	store   Store
	logger  *slog.Logger
	lines   chan jobs.LogEntry
	dropped atomic.Uint64
	// mu guards sending on lines against its closing: a handler that
	// ignored its cancellation may still log after the pool has stopped.
	mu     sync.RWMutex
	closed bool
}

func newJobLogWriter(store Store, logger *slog.Logger) *jobLogWriter {
	return &jobLogWriter{store: store, logger: logger, lines: make(chan jobs.LogEntry, jobLogBacklog)}
}

func (w *jobLogWriter) add(e jobs.LogEntry) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return
	}
	select {
	case w.lines <- e:
	default:
		w.dropped.Add(1)
	}
}

// close stops taking lines; run writes what is left and returns.
func (w *jobLogWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.lines)
	}
}

// run writes batches until lines is closed, then writes what is left.
func (w *jobLogWriter) run() {
	batch := make([]jobs.LogEntry, 0, jobLogBatch)
	for e := range w.lines {
		batch = append(batch[:0], e)
		linger := time.NewTimer(jobLogLinger)
	fill:
		for len(batch) < jobLogBatch {
			select {
			case e, ok := <-w.lines:
				if !ok {
					break fill
				}
				batch = append(batch, e)
			case <-linger.C:
				break fill
			}
		}
		linger.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.store.InsertJobLogs(ctx, batch); err != nil {
			w.dropped.Add(uint64(len(batch)))
			w.logger.Warn("writing job log lines failed; they are dropped", "error", err, "lines", len(batch))
		}
		cancel()
	}
}

// jobLogHandler is the slog handler behind jobs.Logger, behind the log
// file's scrubbing (logs.Scrubbing): each record goes to the job's own log
// (capped per attempt) and to the process log with the job's id.
type jobLogHandler struct {
	w    *jobLogWriter
	ex   *execution
	next slog.Handler
	// pre holds the attributes of With calls, flattened under the group
	// that was open when each was added.
	pre   map[string]any
	group string
}

func (h *jobLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *jobLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelInfo {
		n := h.ex.logLines.Add(1)
		switch {
		case n <= jobs.MaxJobLogLines:
			attrs := make(map[string]any, len(h.pre)+r.NumAttrs())
			for k, v := range h.pre {
				attrs[k] = v
			}
			r.Attrs(func(a slog.Attr) bool { putAttr(attrs, h.group, a); return true })
			if len(attrs) == 0 {
				attrs = nil
			}
			h.w.add(jobs.LogEntry{JobID: h.ex.job.ID, Attempt: h.ex.job.Attempt, At: r.Time, Level: levelName(r.Level),
				Message: r.Message, Attrs: attrs})
		case n == jobs.MaxJobLogLines+1:
			h.w.add(jobs.LogEntry{JobID: h.ex.job.ID, Attempt: h.ex.job.Attempt, At: r.Time, Level: "warn",
				Message: fmt.Sprintf("this attempt logged more than %d lines; later ones are not kept here", jobs.MaxJobLogLines)})
		}
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *jobLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.pre = make(map[string]any, len(h.pre)+len(as))
	for k, v := range h.pre {
		c.pre[k] = v
	}
	for _, a := range as {
		putAttr(c.pre, h.group, a)
	}
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *jobLogHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group = name
	if h.group != "" {
		c.group = h.group + "." + name
	}
	c.next = h.next.WithGroup(name)
	return &c
}

// putAttr stores an attribute as the job log keeps it, flattened to
// "group.key" (the scrubbing handler in front has redacted it already).
func putAttr(m map[string]any, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	switch a.Value.Kind() {
	case slog.KindGroup:
		for _, g := range a.Value.Group() {
			putAttr(m, key, g)
		}
	case slog.KindInt64, slog.KindUint64, slog.KindFloat64, slog.KindBool:
		if key != "" {
			m[key] = a.Value.Any()
		}
	default:
		if key != "" {
			m[key] = a.Value.String()
		}
	}
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	case l >= slog.LevelInfo:
		return "info"
	default:
		return "debug"
	}
}
