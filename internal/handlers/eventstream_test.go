package handlers

import (
	"bufio"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/syncbuf"
)

// The heartbeat and the stream's own messages share the writer without
// interleaving, and the heartbeat stops with the context.
func TestEventStreamHeartbeat(t *testing.T) {
	t.Parallel()
	out := &syncbuf.Buffer{}
	st := &eventStream{w: bufio.NewWriterSize(out, 16)} // small: writes flush midway
	ctx, cancel := context.WithCancel(context.Background())
	var beating sync.WaitGroup
	beating.Go(func() { st.heartbeat(ctx, cancel, time.Millisecond, ": beat\n\n") })
	for i := 0; i < 200; i++ {
		require.True(t, st.send(func(w *bufio.Writer) { _, _ = w.WriteString("event: x\ndata: {}\n\n") }))
	}
	require.Eventually(t, func() bool { return strings.Count(out.String(), ": beat\n\n") >= 3 }, 5*time.Second, time.Millisecond)
	cancel()
	beating.Wait()
	for _, msg := range strings.SplitAfter(out.String(), "\n\n") {
		require.Contains(t, []string{"event: x\ndata: {}\n\n", ": beat\n\n", ""}, msg)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("client went") }

// A heartbeat that cannot be written ends the stream.
func TestEventStreamHeartbeatEndsDeadStream(t *testing.T) {
	t.Parallel()
	st := &eventStream{w: bufio.NewWriter(failingWriter{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { st.heartbeat(ctx, cancel, time.Millisecond, ": beat\n\n"); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat kept going on a dead stream")
	}
	require.Error(t, ctx.Err(), "the stream's context is cancelled")
	require.False(t, st.send(func(w *bufio.Writer) { _, _ = w.WriteString("event: x\n\n") }))
}
