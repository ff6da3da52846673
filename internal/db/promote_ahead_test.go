package db_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestPromoteAhead: PromoteIDs with an ahead queues a scheduled job and a
// sleeper whose time is within it, keeping their run_at, and never a wait
// for a signal before its timeout. A claim whose jobs start at once
// (pull workers, push; in a plain and in a limited queue) leaves queued
// jobs whose run_at is still ahead; the pool's buffered claim takes them.
func TestPromoteAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setQueue(t, "ahead-limited", func(q domain.QueueSettings) domain.QueueSettings {
		n := 10
		q.Concurrency = &n
		return q
	})
	at := time.Now().Add(30 * time.Second).Truncate(time.Millisecond)
	var ahead, signal []uuid.UUID
	for _, q := range []string{"ahead", "ahead-limited"} {
		sched := b.enqueue(t, jobs.EnqueueParams{Queue: q, RunAt: &at})
		require.Equal(t, jobs.StateScheduled, sched.Status)
		sleeper := b.enqueue(t, jobs.EnqueueParams{Queue: q})
		b.suspend(t, b.claimFirstOf(t, q), jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "nap", Until: at}, nil)
		waiter := b.enqueue(t, jobs.EnqueueParams{Queue: q})
		b.suspend(t, b.claimFirstOf(t, q), jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "approval", Until: at}, nil)
		ahead = append(ahead, sched.ID, sleeper.ID)
		signal = append(signal, waiter.ID)
	}
	all := append(append([]uuid.UUID{}, ahead...), signal...)

	moved, err := b.store.PromoteIDs(b.ctx, all, time.Second)
	require.NoError(t, err)
	require.Empty(t, moved, "nothing is due within a second")
	moved, err = b.store.PromoteIDs(b.ctx, all, time.Minute)
	require.NoError(t, err)
	var got []uuid.UUID
	for _, m := range moved {
		got = append(got, m.JobID)
		require.Equal(t, jobs.StateQueued, m.Status)
		require.True(t, m.RunAt.Equal(at), "run_at is kept: %s, want %s", m.RunAt, at)
	}
	require.ElementsMatch(t, ahead, got)
	for _, id := range signal {
		require.Equal(t, jobs.StateWaiting, b.status(t, id), "a wait for a signal ends at its timeout, not before")
	}

	for _, q := range []string{"ahead", "ahead-limited"} {
		require.Empty(t, b.claimQueue(t, q), "a claim that starts its jobs at once takes only due jobs (%s)", q)
		claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "pool", Queues: []string{q}, Limit: 10,
			LeaseTTL: time.Minute, Buffered: true})
		require.NoError(t, err)
		require.Len(t, claimed, 2, "the pool's buffered claim takes them ahead of their time (%s)", q)
		for _, c := range claimed {
			require.Contains(t, ahead, c.ID)
			require.True(t, c.RunAt.Equal(at))
			require.Nil(t, c.StartedAt, "claimed, not started")
		}
	}
}

// TestPromoteAheadWakesQueuesAtRunAt: the queue of a job promoted ahead of
// its time is woken at the promotion (ChannelJobs, which in-process pools
// listen to) and again at its run_at, not before, on ChannelDue, for the
// pull workers and push deliveries that found nothing due at the first
// wake-up; pools, which hold the job already, are not woken again.
func TestPromoteAheadWakesQueuesAtRunAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	woken, due := make(chan time.Time, 16), make(chan time.Time, 16)
	listener := db.NewListener(b.url, slog.New(slog.NewTextHandler(io.Discard, nil)), 0)
	listener.Handle(db.ChannelJobs, func(payload string) {
		if payload == "wake-at" {
			woken <- time.Now()
		}
	})
	listener.Handle(db.ChannelDue, func(payload string) {
		if payload == "wake-at" {
			due <- time.Now()
		}
	})
	connected := make(chan struct{}, 1)
	listener.OnConnect(func() {
		select {
		case connected <- struct{}{}:
		default:
		}
	})
	ctx, stop := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = listener.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-connected:
	case <-b.ctx.Done():
		t.Fatal("listener did not connect")
	}

	at := time.Now().Add(1500 * time.Millisecond)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "wake-at", RunAt: &at})
	moved, err := b.store.PromoteIDs(b.ctx, []uuid.UUID{j.ID}, time.Minute)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	first := <-woken
	require.True(t, first.Before(at), "the promotion wakes the queue at once")
	var second time.Time
	select {
	case second = <-due:
	case <-b.ctx.Done():
		t.Fatal("the queue was not woken again at the job's run_at")
	}
	require.False(t, second.Before(at), "woken again at run_at (%s), not before (%s)", at, second)
	// Notifications reach the listener in the order they were sent: a
	// wake-up of the pools at run_at would have come by now.
	select {
	case again := <-woken:
		t.Fatalf("the pools' channel was woken again at %s", again)
	default:
	}
}
