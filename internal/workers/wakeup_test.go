package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// wakeBundle is an API process and a worker process on one database: the
// first enqueues through a store of its own, the second runs a pool woken
// by its own LISTEN connection.
type wakeBundle struct {
	*testBundle
	api *db.Store
}

func setupWake(t *testing.T, poll time.Duration) *wakeBundle {
	t.Helper()
	store, url := dbtest.NewStore(t)
	b := &testBundle{store: store, ctx: context.Background()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	b.ctx = ctx
	b.registry = jobs.NewRegistry()
	domain.RegisterBuiltins(b.registry, domain.BuiltinDeps{})

	api, err := db.Open(ctx, db.Config{URL: url, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(api.Close)

	pool, _ := b.start(t, workers.Config{Workers: 2, PollInterval: poll})
	listener := db.NewListener(url, quietLogger(), 0)
	listener.Handle(db.ChannelJobs, pool.Wake)
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() {
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = listener.Run(lctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("listener did not connect")
	}
	return &wakeBundle{testBundle: b, api: api}
}

// runOne enqueues a noop through the API process's store and returns how
// long it waited between its creation and its start.
func (b *wakeBundle) runOne(t *testing.T) time.Duration {
	t.Helper()
	res, err := b.api.Enqueue(b.ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
	require.NoError(t, err)
	j := b.waitFor(t, res[0].Job.ID, 30*time.Second, status(jobs.StateCompleted))
	require.NotNil(t, j.StartedAt)
	return j.StartedAt.Sub(j.CreatedAt)
}

// TestWakeupCrossesProcesses: a job enqueued by another process starts at
// once, long before the pool's next poll: the notification sent after the
// enqueue's commit woke it.
func TestWakeupCrossesProcesses(t *testing.T) {
	t.Parallel()
	b := setupWake(t, time.Hour)
	b.runOne(t) // the pool's first poll has passed; it now sleeps
	for range 3 {
		wait := b.runOne(t)
		require.Less(t, wait, 5*time.Second, "only a notification can have woken a pool that polls hourly")
	}
	sent, failed := b.api.WakeupsSent()
	require.Positive(t, sent)
	require.Zero(t, failed)
}

// TestLostWakeupFallsBackToPolling: the job's only notification is lost
// (as when the enqueuing process dies between its commit and the send);
// the pool still runs the job within its poll interval.
func TestLostWakeupFallsBackToPolling(t *testing.T) {
	t.Parallel()
	const poll = 500 * time.Millisecond
	b := setupWake(t, poll)
	b.runOne(t)
	dropped := make(chan string, 16)
	b.api.SetWakeupFilter(func(channel, payload string) bool {
		if channel == db.ChannelJobs {
			dropped <- payload
			return true
		}
		return false
	})
	for range 3 {
		// Without its notification only a poll finds the job: within a few
		// intervals however busy the machine (a pool that polled hourly
		// would never get it), not at the next one to the millisecond.
		wait := b.runOne(t)
		require.Less(t, wait, 10*poll, "picked up by polling")
	}
	require.NotEmpty(t, dropped, "the notifications were dropped")
}
