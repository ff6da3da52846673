package handlers

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func events(n int, status jobs.State) []domain.Event {
	out := make([]domain.Event, n)
	for i := range out {
		out[i] = domain.Event{JobID: uuid.New(), Status: status, Type: "noop", At: time.Now()}
	}
	return out
}

// TestBrokerDropsSlowClients: a subscriber that never reads is dropped once
// its buffer fills; delivery never blocks and other subscribers get
// everything.
func TestBrokerDropsSlowClients(t *testing.T) {
	t.Parallel()
	b := NewBroker(100)
	slow, _, _ := b.subscribe(eventFilter{}, "")
	fast, _, _ := b.subscribe(eventFilter{}, "")
	got := 0
	start := time.Now()
	for range 6 {
		b.Deliver(events(100, jobs.StateQueued)) // never waits for the slow one
		for range 100 {
			<-fast.ch
			got++
		}
	}
	require.Less(t, time.Since(start), 5*time.Second, "delivery does not wait for readers")
	select {
	case <-slow.gone:
	default:
		t.Fatal("the slow subscriber was not dropped when its buffer filled")
	}
	require.Equal(t, 600, got, "the subscriber that keeps up gets everything")
	require.Equal(t, uint64(1), b.Dropped())
	require.Equal(t, 1, b.Subscribers())
}

func TestBrokerReplayAndFilters(t *testing.T) {
	t.Parallel()
	b := NewBroker(5)
	s, _, _ := b.subscribe(eventFilter{statuses: []jobs.State{jobs.StateCompleted}}, "")
	b.Deliver(events(1, jobs.StateQueued))
	b.Deliver(events(1, jobs.StateCompleted))
	e := <-s.ch
	require.Equal(t, jobs.StateCompleted, e.ev.Status, "filtered")
	last := b.id(e.seq)
	b.Deliver(events(3, jobs.StateCompleted))
	_, replay, resync := b.subscribe(eventFilter{}, last)
	require.False(t, resync)
	require.Len(t, replay, 3)
	// Older than the ring: resync.
	b.Deliver(events(10, jobs.StateCompleted))
	_, _, resync = b.subscribe(eventFilter{}, last)
	require.True(t, resync)
	_, _, resync = b.subscribe(eventFilter{}, "otherboot-1")
	require.True(t, resync)
}
