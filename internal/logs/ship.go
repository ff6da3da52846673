package logs

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Sink stores shipped entries; *db.Store implements it.
type Sink interface {
	// InsertLogs stores entries as logged by process p, in one write.
	InsertLogs(ctx context.Context, p Process, entries []Entry) error
}

// ShipConfig configures Logger.Ship.
type ShipConfig struct {
	// Process is stored with every entry.
	Process Process
	// Interval between writes; zero means 1 s. A full batch is written at
	// once.
	Interval time.Duration
	// BatchSize is the most entries one write stores; zero means 1000.
	BatchSize int
	// WriteTimeout bounds one write; zero means 10 s.
	WriteTimeout time.Duration
}

const (
	defaultBufferEntries = 10_000
	defaultBufferBytes   = 8 << 20
)

// DroppedMessage is the entry a shipper stores after it had to drop
// entries: its "dropped" attribute says how many.
const DroppedMessage = "log entries dropped before reaching the database"

// buffer holds the JSON lines recorded since the last write, up to a
// number of entries and of bytes. Recording never waits for a write: it
// copies the line under a lock held only for the copy, or counts it as
// dropped when the buffer is full. Lines are parsed only when written.
type buffer struct {
	mu         sync.Mutex
	data       []byte // the lines, one after another
	ends       []int  // where each line ends in data
	dropped    uint64 // since the last write
	lastErr    string // why the last write failed, scrubbed; "" when it did not
	maxEntries int
	maxBytes   int
	batch      int           // entries that make a batch (set by Ship)
	full       chan struct{} // holds a token when a batch is waiting
	stopped    bool          // Ship has returned: nothing is written any more

	droppedTotal atomic.Uint64
}

func newBuffer(maxEntries, maxBytes int) *buffer {
	return &buffer{
		maxEntries: cmp.Or(maxEntries, defaultBufferEntries),
		maxBytes:   cmp.Or(maxBytes, defaultBufferBytes),
		batch:      cmp.Or(maxEntries, defaultBufferEntries),
		full:       make(chan struct{}, 1),
	}
}

// add records one JSON line (copied).
func (b *buffer) add(line []byte) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	if len(b.ends) >= b.maxEntries || len(b.data)+len(line) > b.maxBytes {
		b.dropped++
		b.mu.Unlock()
		b.droppedTotal.Add(1)
		return
	}
	b.data = append(b.data, line...)
	b.ends = append(b.ends, len(b.data))
	kick := len(b.ends) == b.batch
	b.mu.Unlock()
	if kick {
		select {
		case b.full <- struct{}{}:
		default:
		}
	}
}

// take empties the buffer and returns its lines, the number dropped since
// the last take and why the last write failed.
func (b *buffer) take() (data []byte, ends []int, dropped uint64, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ends, dropped, lastErr = b.data, b.ends, b.dropped, b.lastErr
	b.data, b.ends, b.dropped, b.lastErr = nil, nil, 0, ""
	return data, ends, dropped, lastErr
}

// lost counts n entries a write failed to store, and again earlier drops
// it failed to report, for the next write to report.
func (b *buffer) lost(n, again uint64, err error) {
	b.mu.Lock()
	b.dropped += n + again
	b.lastErr = Scrub(err.Error())
	b.mu.Unlock()
	b.droppedTotal.Add(n)
}

func (b *buffer) stop() {
	b.mu.Lock()
	b.stopped = true
	b.data, b.ends = nil, nil
	b.mu.Unlock()
}

// Dropped counts the entries this logger recorded that never reached the
// database: the buffer was full, or a write failed.
func (l *Logger) Dropped() uint64 { return l.buf.droppedTotal.Load() }

// Ship stores what this logger records in sink, in batches, until ctx is
// done: every scrubbed entry from the logger's creation on, with
// cfg.Process. Entries wait in a bounded buffer (Config.BufferEntries and
// BufferBytes); when it is full, or a write fails, entries are dropped and
// the next write stores a DroppedMessage entry that counts them, so
// logging never waits for the database and never grows without bound.
// Stdout and the file get every entry whatever happens here. When ctx is
// done, Ship writes what is left and returns; later entries are not
// shipped. Call it once.
func (l *Logger) Ship(ctx context.Context, sink Sink, cfg ShipConfig) {
	b := l.buf
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	cfg.WriteTimeout = cmp.Or(cfg.WriteTimeout, 10*time.Second)
	b.mu.Lock()
	b.batch = cfg.BatchSize
	b.mu.Unlock()
	defer b.stop()
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.write(ctx, sink, cfg)
			return
		case <-t.C:
		case <-b.full:
		}
		b.write(ctx, sink, cfg)
	}
}

// write stores what the buffer holds, in batches; entries of a batch that
// fails are counted as dropped. Writes outlive ctx by up to WriteTimeout,
// so that the last entries of a stopping process are kept.
func (b *buffer) write(ctx context.Context, sink Sink, cfg ShipConfig) {
	data, ends, dropped, lastErr := b.take()
	entries := make([]Entry, 0, len(ends)+1)
	if dropped > 0 {
		// First, so that the count is stored before anything else.
		e := Entry{Time: time.Now(), Level: "WARN", Msg: DroppedMessage, Component: "logs",
			Attrs: map[string]any{"dropped": dropped}, Error: lastErr}
		entries = append(entries, e)
	}
	start := 0
	for _, end := range ends {
		if e, ok := parseEntry(data[start:end]); ok {
			if e.Time.IsZero() {
				e.Time = time.Now()
			}
			entries = append(entries, e)
		}
		start = end
	}
	wctx := context.WithoutCancel(ctx)
	for first := true; len(entries) > 0; first = false {
		n := min(len(entries), cfg.BatchSize)
		c, cancel := context.WithTimeout(wctx, cfg.WriteTimeout)
		err := sink.InsertLogs(c, cfg.Process, entries[:n])
		cancel()
		if err != nil {
			lost, again := uint64(n), uint64(0)
			if first && dropped > 0 {
				// The count's own entry is not one of the entries lost, and
				// the ones it counted are to be counted again.
				lost, again = lost-1, dropped
			}
			b.lost(lost, again, err)
		}
		entries = entries[n:]
	}
}
