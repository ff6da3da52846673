package db

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestListenerWithoutConnectionPolls: a listener with no direct connection
// (behind PgBouncer) never connects; it runs the OnConnect callbacks at
// once and then on every tick, as if it had just reconnected, and stops
// with its context.
func TestListenerWithoutConnectionPolls(t *testing.T) {
	l := NewListener("", slog.New(slog.DiscardHandler), 0)
	var calls atomic.Int32
	l.OnConnect(func() { calls.Add(1) })
	l.Handle(ChannelJobs, func(string) { t.Error("a listener without a connection delivered a notification") })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond, "OnConnect at start")
	cancel()
	require.NoError(t, <-done)

	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- l.poll(ctx, 10*time.Millisecond) }()
	require.Eventually(t, func() bool { return calls.Load() >= 4 }, 5*time.Second, time.Millisecond, "OnConnect on every tick")
	cancel()
	require.NoError(t, <-done)
}
