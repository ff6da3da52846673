package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Config configures New.
type Config struct {
	Level      string    // debug | info (default) | warn | error
	Format     string    // json (default) | text — stdout only; the file is always JSON
	File       string    // rotating log file; "" or "-" = stdout only
	MaxSizeMB  int       // rotate when the file would exceed this; 0 = 10 (lumberjack's unit is MB, so 1 is the minimum)
	MaxBackups int       // rotated files kept; 0 = 5
	Compress   bool      // gzip rotated files
	Stdout     io.Writer // nil = os.Stdout
	// BufferEntries and BufferBytes bound the entries held for Ship; zero
	// means 10,000 entries and 8 MiB.
	BufferEntries int
	BufferBytes   int
}

// Logger is the process logger: one scrubbing slog handler in front of
// stdout, the rotating JSON file and the buffer Ship writes to the
// database.
type Logger struct {
	slog   *slog.Logger
	buf    *buffer
	file   string
	rot    *lumberjack.Logger
	fileW  *fileWriter
	closed atomic.Bool
}

// New builds a Logger from cfg. It creates the log file's directory and
// checks that the file can be opened for appending.
func New(cfg Config) (*Logger, error) {
	level := slog.LevelInfo
	if cfg.Level != "" {
		lv, err := ParseLevel(cfg.Level)
		if err != nil {
			return nil, fmt.Errorf("log level %q: must be debug, info, warn or error", cfg.Level)
		}
		level = lv
	}
	format := strings.ToLower(cfg.Format)
	if format != "" && format != "json" && format != "text" {
		return nil, fmt.Errorf("log format %q: must be json or text", cfg.Format)
	}
	stdout := cfg.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}
	if cfg.MaxSizeMB < 0 || cfg.MaxBackups < 0 {
		return nil, errors.New("log file: MaxSizeMB and MaxBackups must not be negative")
	}

	if cfg.BufferEntries < 0 || cfg.BufferBytes < 0 {
		return nil, errors.New("log buffer: BufferEntries and BufferBytes must not be negative")
	}

	l := &Logger{buf: newBuffer(cfg.BufferEntries, cfg.BufferBytes)}
	// jsonOut receives every record as one JSON line per Write.
	jsonOut := &teeWriter{buf: l.buf}
	if cfg.File != "" && cfg.File != "-" {
		if err := os.MkdirAll(filepath.Dir(cfg.File), 0o755); err != nil {
			return nil, fmt.Errorf("log file: %w", err)
		}
		f, err := os.OpenFile(cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("log file: %w", err)
		}
		_ = f.Close()
		l.file = cfg.File
		l.rot = &lumberjack.Logger{
			Filename:   cfg.File,
			MaxSize:    orDefault(cfg.MaxSizeMB, 10),
			MaxBackups: orDefault(cfg.MaxBackups, 5),
			Compress:   cfg.Compress,
		}
		l.fileW = &fileWriter{w: l.rot, name: cfg.File, stderr: os.Stderr}
		jsonOut.file = l.fileW
	}

	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if format == "text" {
		h = fanout{slog.NewTextHandler(stdout, opts), slog.NewJSONHandler(jsonOut, opts)}
	} else {
		jsonOut.stdout = stdout
		h = slog.NewJSONHandler(jsonOut, opts)
	}
	l.slog = slog.New(newScrubHandler(h))
	return l, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Slog returns the logger to pass around.
func (l *Logger) Slog() *slog.Logger { return l.slog }

// File returns the log file path, "" when logging to stdout only.
func (l *Logger) File() string { return l.file }

// Close closes the log file. Records logged afterwards still reach stdout
// but no longer the file.
func (l *Logger) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.fileW == nil {
		return nil
	}
	return l.fileW.close()
}

// fileWriter stops writing to lumberjack once closed (lumberjack would
// reopen the file on the next Write). A write that fails (the disk is
// full, the file was made read-only) costs nothing but that line in the
// file: records still reach stdout and the database, jobs run on, and the
// first failure and the recovery are said on stderr, once each.
type fileWriter struct {
	mu      sync.Mutex
	w       io.WriteCloser
	name    string
	stderr  io.Writer
	closed  bool
	failing bool
}

func (f *fileWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return len(p), nil
	}
	n, err := f.w.Write(p)
	switch {
	case err != nil && !f.failing:
		f.failing = true
		fmt.Fprintf(f.stderr, "flint: cannot write the log file %s: %v; records go on to stdout and the database, and Flint keeps running\n", f.name, err)
	case err == nil && f.failing:
		f.failing = false
		fmt.Fprintf(f.stderr, "flint: the log file %s is written again\n", f.name)
	}
	return n, err
}

func (f *fileWriter) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return f.w.Close()
}

// truncateLine replaces an oversized JSON line by a short valid one that
// keeps its time, level and message, so the record is not lost entirely.
func truncateLine(p []byte) []byte {
	e, ok := parseEntry(p)
	if !ok {
		return p[:0]
	}
	msg := e.Msg
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	b, err := marshalNoEscape(map[string]any{
		slog.TimeKey: e.Time, slog.LevelKey: e.Level, slog.MessageKey: msg,
		"component": e.Component, "job_id": e.JobID, "truncated_bytes": len(p),
	})
	if err != nil {
		return p[:0]
	}
	return append(b, '\n')
}

// teeWriter receives each JSON line once (slog's JSON handler writes a whole
// record per Write, under its lock) and passes it to stdout, the file and
// the buffer for the database; a line over MaxLineBytes goes whole to
// stdout and shortened to the file and the buffer. A failing destination
// does not starve the others; the first error is returned.
type teeWriter struct {
	stdout io.Writer
	file   io.Writer
	buf    *buffer
}

func (t *teeWriter) Write(p []byte) (int, error) {
	var first error
	if t.stdout != nil {
		if _, err := t.stdout.Write(p); err != nil {
			first = err
		}
	}
	line := p
	if len(line) > MaxLineBytes {
		// Too big to keep whole; keep a short record of it instead.
		line = truncateLine(line)
	}
	if t.file != nil && len(line) > 0 {
		if _, err := t.file.Write(line); err != nil && first == nil {
			first = err
		}
	}
	if len(line) > 0 {
		t.buf.add(line)
	}
	return len(p), first
}

// fanout sends each record to every handler that wants it.
type fanout []slog.Handler

func (f fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range f {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (f fanout) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range f {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (f fanout) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (f fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(f))
	for i, h := range f {
		out[i] = h.WithGroup(name)
	}
	return out
}
