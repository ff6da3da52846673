package workers

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flinthq/flint/internal/domain"
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
//
// Lines are numbered as they are queued, and the writer counts those it
// has dealt with, so that an outcome can wait for its job's lines
// (waitWritten): a finished job's log is complete when the job shows
// finished, which is when a page stops following it.
type jobLogWriter struct {
	store   Store
	logger  *slog.Logger
	lines   chan domain.LogEntry
	dropped atomic.Uint64
	// mu guards sending on lines against its closing (a handler that
	// ignored its cancellation may still log after the pool has stopped)
	// and sent, the number of the last line queued, so that lines are
	// numbered in the channel's order.
	mu     sync.Mutex
	closed bool
	sent   uint64
	// done is how many queued lines the writer has dealt with (stored, or
	// dropped with a failed insert); want is the highest line number an
	// outcome waits for, and kick cuts a batch's linger short for it.
	done atomic.Uint64
	want atomic.Uint64
	kick chan struct{}
	// progressMu guards progress, closed and replaced each time done
	// moves.
	progressMu sync.Mutex
	progress   chan struct{}
}

func newJobLogWriter(store Store, logger *slog.Logger) *jobLogWriter {
	return &jobLogWriter{store: store, logger: logger, lines: make(chan domain.LogEntry, jobLogBacklog),
		kick: make(chan struct{}, 1), progress: make(chan struct{})}
}

// add queues e and returns its number, or 0 when it was dropped.
func (w *jobLogWriter) add(e domain.LogEntry) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.dropped.Add(1)
		return 0
	}
	select {
	case w.lines <- e:
		w.sent++
		return w.sent
	default:
		w.dropped.Add(1)
		return 0
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

// run writes batches until lines is closed, then writes what is left. A
// batch gathers for jobLogLinger, less when an outcome waits for a line it
// holds.
func (w *jobLogWriter) run() {
	batch := make([]domain.LogEntry, 0, jobLogBatch)
	var taken uint64
	for e := range w.lines {
		batch = append(batch[:0], e)
		taken++
		linger := time.NewTimer(jobLogLinger)
	fill:
		for len(batch) < jobLogBatch {
			if want := w.want.Load(); want > w.done.Load() && want <= taken {
				break // an outcome waits for a line in this batch
			}
			select {
			case e, ok := <-w.lines:
				if !ok {
					break fill
				}
				batch = append(batch, e)
				taken++
			case <-linger.C:
				break fill
			case <-w.kick:
			}
		}
		linger.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.store.InsertJobLogs(ctx, batch); err != nil {
			w.dropped.Add(uint64(len(batch)))
			w.logger.Warn("writing job log lines failed; they are dropped", "error", err, "lines", len(batch))
		}
		cancel()
		w.advance(taken)
	}
}

// advance records that the writer has dealt with the first n lines.
func (w *jobLogWriter) advance(n uint64) {
	w.progressMu.Lock()
	defer w.progressMu.Unlock()
	w.done.Store(n)
	close(w.progress)
	w.progress = make(chan struct{})
}

// waitWritten waits, at most timeout, until the writer has dealt with
// line n and every line before it, and reports whether it has.
func (w *jobLogWriter) waitWritten(n uint64, timeout time.Duration) bool {
	if n == 0 || w.done.Load() >= n {
		return true
	}
	for {
		cur := w.want.Load()
		if cur >= n || w.want.CompareAndSwap(cur, n) {
			break
		}
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.progressMu.Lock()
		moved := w.progress
		w.progressMu.Unlock()
		if w.done.Load() >= n {
			return true
		}
		select {
		case <-moved:
		case <-deadline.C:
			return false
		}
	}
}

// Lines written with the outcome.
//
// Most jobs are short, and a line stored on its own costs an insert of
// its own, in a transaction of its own, beside the outcome's. So the lines
// a first attempt logs are held by its execution, and if the handler
// returns within jobLogLinger of its first line (the time a line waits in
// the writer anyway), they go with the outcome and are stored by the same
// statement (domain.Finish.Log). A handler that runs longer has its lines
// passed to the writer when the linger ends, and every later line goes
// there straight away, so a running job's log still fills in live and in
// order. Later attempts, which may share the log's per-job cap with lines
// of earlier ones, always use the writer, which keeps that cap. If the
// outcome's lease turns out lost, or the database refuses the lines, the
// finisher passes them to the writer, so they are kept as before. An
// outcome whose lines went through the writer waits for them to be stored
// (Pool.awaitLogs).

// holdsLog reports whether ex's lines may be held for its outcome: a first
// attempt that no interruption refunded, whose log can hold no lines but
// its own (at most domain.MaxJobLogLines, under the per-job cap).
func (ex *execution) holdsLog() bool {
	return ex.job.Attempt == 1 && ex.job.Interruptions == 0
}

// log holds e for the outcome or passes it to the writer (see above).
func (ex *execution) log(w *jobLogWriter, e domain.LogEntry) {
	ex.logMu.Lock()
	defer ex.logMu.Unlock()
	if e.At.After(ex.lastLog) {
		ex.lastLog = e.At
	}
	if ex.passed || !ex.holdsLog() {
		ex.queued(w.add(e))
		return
	}
	ex.held = append(ex.held, e)
	if ex.holdStop == nil {
		ex.holdStop = time.AfterFunc(jobLogLinger, func() { ex.passLog(w) }).Stop
	}
}

// passLog hands the held lines to the writer; later ones go there too.
func (ex *execution) passLog(w *jobLogWriter) {
	ex.logMu.Lock()
	defer ex.logMu.Unlock()
	ex.passed = true
	for _, e := range ex.held {
		ex.queued(w.add(e))
	}
	ex.held = nil
}

// queued notes that the writer took ex's line number n (0: dropped);
// logMu is held.
func (ex *execution) queued(n uint64) {
	ex.loggedThrough = max(ex.loggedThrough, n)
}

// takeLog returns the lines held for the outcome; later ones go to the
// writer.
func (ex *execution) takeLog() []domain.LogEntry {
	ex.logMu.Lock()
	defer ex.logMu.Unlock()
	ex.passed = true
	if ex.holdStop != nil {
		ex.holdStop()
	}
	held := ex.held
	ex.held = nil
	return held
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
		case n <= domain.MaxJobLogLines:
			attrs := make(map[string]any, len(h.pre)+r.NumAttrs())
			for k, v := range h.pre {
				attrs[k] = v
			}
			r.Attrs(func(a slog.Attr) bool { putAttr(attrs, h.group, a); return true })
			if len(attrs) == 0 {
				attrs = nil
			}
			h.ex.log(h.w, domain.LogEntry{JobID: h.ex.job.ID, Attempt: h.ex.job.Attempt, At: r.Time, Level: levelName(r.Level),
				Message: r.Message, Attrs: attrs})
		case n == domain.MaxJobLogLines+1:
			h.ex.log(h.w, domain.LogEntry{JobID: h.ex.job.ID, Attempt: h.ex.job.Attempt, At: r.Time, Level: "warn",
				Message: fmt.Sprintf("this attempt logged more than %d lines; later ones are not kept here", domain.MaxJobLogLines)})
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

// lazyAttrs is the process log's handler with the job's attributes,
// added only when a line reaches it: a job's logger is made for every job
// that logs, and most of its lines stay below the process log's level,
// while adding attributes to a handler formats them at once.
type lazyAttrs struct {
	base  slog.Handler
	attrs []slog.Attr
	once  sync.Once
	with  slog.Handler
}

func (h *lazyAttrs) handler() slog.Handler {
	h.once.Do(func() { h.with = h.base.WithAttrs(h.attrs) })
	return h.with
}

// Enabled asks the base: attributes do not change what a handler takes.
func (h *lazyAttrs) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }

func (h *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h *lazyAttrs) WithAttrs(as []slog.Attr) slog.Handler { return h.handler().WithAttrs(as) }

func (h *lazyAttrs) WithGroup(name string) slog.Handler { return h.handler().WithGroup(name) }

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
