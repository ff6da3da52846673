package logs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/syncbuf"
)

// memSink is a Sink in memory. A write waits while gate is closed (nil:
// never) and fails when fail says so.
type memSink struct {
	mu      sync.Mutex
	entries []Entry
	procs   map[string]bool
	writes  int
	fail    func(write int) error
	gate    chan struct{}
}

func (m *memSink) InsertLogs(ctx context.Context, p Process, es []Entry) error {
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.fail != nil {
		if err := m.fail(m.writes); err != nil {
			return err
		}
	}
	if m.procs == nil {
		m.procs = map[string]bool{}
	}
	m.procs[p.ID+"/"+p.Host+"/"+p.Role] = true
	m.entries = append(m.entries, es...)
	return nil
}

func (m *memSink) writesSoFar() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

func (m *memSink) stored() []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Entry(nil), m.entries...)
}

// droppedCount sums the counts of the DroppedMessage entries stored, and
// returns the other entries.
func droppedCount(t *testing.T, es []Entry) (uint64, []Entry) {
	t.Helper()
	var n uint64
	var rest []Entry
	for _, e := range es {
		if e.Msg != DroppedMessage {
			rest = append(rest, e)
			continue
		}
		require.Equal(t, "WARN", e.Level)
		require.Equal(t, "logs", e.Component)
		switch v := e.Attrs["dropped"].(type) {
		case uint64:
			n += v
		default:
			t.Fatalf("dropped is %T", v)
		}
	}
	return n, rest
}

// ship runs lg.Ship into sink until the returned stop is called.
func ship(t *testing.T, lg *Logger, sink Sink, cfg ShipConfig) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lg.Ship(ctx, sink, cfg)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

var testProcess = Process{ID: "host-1-abc", Host: "host", Role: "worker"}

// Entries from the logger's start, those logged while it ships and those
// logged just before it stops all reach the sink, in order, with the
// process, and the stdout copy is untouched.
func TestShipStoresEveryEntryWithItsProcess(t *testing.T) {
	t.Parallel()
	out := &syncbuf.Buffer{}
	lg, err := New(Config{Stdout: out, Level: "debug"})
	require.NoError(t, err)
	lg.Slog().Info("before shipping", "n", 0)
	sink := &memSink{}
	stop := ship(t, lg, sink, ShipConfig{Process: testProcess, Interval: 20 * time.Millisecond})
	job := uuid.NewString()
	lg.Slog().Debug("while shipping", "n", 1, "component", "worker", "job_id", job)
	require.Eventually(t, func() bool { return len(sink.stored()) == 2 }, 5*time.Second, 5*time.Millisecond)
	lg.Slog().Warn("just before the end", "n", 2, "error", "disk full")
	stop()
	lg.Slog().Info("after the end", "n", 3)

	es := sink.stored()
	require.Len(t, es, 3)
	for i, e := range es {
		require.Equal(t, i, seqOf(t, e))
		require.False(t, e.Time.IsZero())
	}
	require.Equal(t, "DEBUG", es[1].Level)
	require.Equal(t, "worker", es[1].Component)
	require.Equal(t, job, es[1].JobID)
	require.Equal(t, "disk full", es[2].Error)
	require.Equal(t, map[string]bool{"host-1-abc/host/worker": true}, sink.procs)
	require.Zero(t, lg.Dropped())
	require.Equal(t, 4, strings.Count(out.String(), "\n"), "stdout has every entry")
}

// A full buffer drops what comes next and counts it; the next write
// stores the count first. Logging never waits for that.
func TestBufferBoundDropsAndCounts(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}, BufferEntries: 10})
	require.NoError(t, err)
	for i := 0; i < 25; i++ {
		lg.Slog().Info("line", "n", i)
	}
	require.EqualValues(t, 15, lg.Dropped())
	sink := &memSink{}
	stop := ship(t, lg, sink, ShipConfig{Process: testProcess, Interval: 10 * time.Millisecond})
	require.Eventually(t, func() bool { return len(sink.stored()) == 11 }, 5*time.Second, 5*time.Millisecond)
	stop()
	es := sink.stored()
	require.Equal(t, DroppedMessage, es[0].Msg, "the count comes first")
	n, rest := droppedCount(t, es)
	require.EqualValues(t, 15, n)
	for i, e := range rest {
		require.Equal(t, i, seqOf(t, e), "the first ten are kept")
	}

	// The byte bound: entries of about 1 KiB in a 16 KiB buffer.
	lg, err = New(Config{Stdout: discard{}, BufferBytes: 16 << 10})
	require.NoError(t, err)
	logSeq(lg, 0, 40)
	require.InDelta(t, 40-15, int(lg.Dropped()), 2)
}

// With the database stuck, any amount of logging from many goroutines
// returns at once; every entry is then either stored or counted as
// dropped, never lost silently.
func TestLoggingNeverWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}, BufferEntries: 1000})
	require.NoError(t, err)
	sink := &memSink{gate: make(chan struct{})}
	stop := ship(t, lg, sink, ShipConfig{Process: testProcess, Interval: 5 * time.Millisecond, BatchSize: 100})

	const writers, perWriter = 8, 5000
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lg.Slog().With("worker_id", fmt.Sprint("w", w))
			for i := 0; i < perWriter; i++ {
				l.Info("work", "n", i, "password", "concurrentpw")
			}
		}()
	}
	wg.Wait()
	require.Less(t, time.Since(start), 10*time.Second, "logging did not wait for the stuck write")
	require.Greater(t, lg.Dropped(), uint64(0))

	close(sink.gate) // the database is back
	stop()
	n, rest := droppedCount(t, sink.stored())
	require.EqualValues(t, writers*perWriter, int(n)+len(rest), "stored or counted, every one")
	require.EqualValues(t, lg.Dropped(), n)
	last := map[string]int{}
	for _, e := range rest {
		require.Equal(t, Redacted, e.Attrs["password"])
		k := seqOf(t, e)
		if prev, ok := last[e.WorkerID]; ok {
			require.Greater(t, k, prev, "each writer's entries in order")
		}
		last[e.WorkerID] = k
	}
}

// A write that fails drops its entries; the next one counts them and
// says why, scrubbed.
func TestFailedWriteIsCounted(t *testing.T) {
	t.Parallel()
	lg, err := New(Config{Stdout: discard{}})
	require.NoError(t, err)
	sink := &memSink{fail: func(write int) error {
		if write <= 2 {
			return errors.New("dial postgres://flint:hunter2@db:5432/flint: connection refused")
		}
		return nil
	}}
	for i := 0; i < 3; i++ {
		lg.Slog().Info("line", "n", i)
	}
	stop := ship(t, lg, sink, ShipConfig{Process: testProcess, Interval: 10 * time.Millisecond})
	require.Eventually(t, func() bool { return sink.writesSoFar() >= 2 }, 5*time.Second, 5*time.Millisecond)
	lg.Slog().Info("line", "n", 3)
	require.Eventually(t, func() bool { return len(sink.stored()) > 0 }, 5*time.Second, 5*time.Millisecond)
	stop()
	es := sink.stored()
	n, rest := droppedCount(t, es)
	require.EqualValues(t, 3, n, "the three of the failed write; the second write failed with the count alone")
	require.EqualValues(t, 3, lg.Dropped())
	require.Len(t, rest, 1)
	require.Equal(t, 3, seqOf(t, rest[0]))
	require.Contains(t, es[0].Error, "connection refused")
	require.NotContains(t, es[0].Error, "hunter2")
}

// A record over MaxLineBytes goes whole to stdout, and shortened to its
// time, level, message and job id to the file and the database.
func TestOversizedRecordIsShortenedInFileAndShipped(t *testing.T) {
	t.Parallel()
	out := &syncbuf.Buffer{}
	lg := newFileLogger(t, Config{Stdout: out})
	sink := &memSink{}
	stop := ship(t, lg, sink, ShipConfig{Process: testProcess})
	job := uuid.NewString()
	lg.Slog().Info("big payload", "job_id", job, "blob", strings.Repeat("z", 100<<10))
	lg.Slog().Info("after", "n", 1)
	stop()

	require.Greater(t, len(out.String()), 100<<10, "stdout gets the whole record")
	file, err := os.ReadFile(lg.File())
	require.NoError(t, err)
	require.Less(t, len(file), MaxLineBytes)
	es := sink.stored()
	require.Len(t, es, 2)
	require.Equal(t, "big payload", es[0].Msg)
	require.Equal(t, job, es[0].JobID)
	require.NotContains(t, es[0].Attrs, "blob")
	require.Contains(t, es[0].Attrs, "truncated_bytes")
	b, err := json.Marshal(es[0])
	require.NoError(t, err)
	require.Less(t, len(b), MaxLineBytes)
}
