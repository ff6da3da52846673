package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Broker fans job events out to SSE subscribers in this process. It numbers
// the events it delivers and keeps the latest in a ring, so that a client
// reconnecting to the same process with Last-Event-ID gets what it missed;
// a client whose id the ring no longer holds (or that comes from another
// process) is told to resync from the API. A client that does not keep up
// is dropped, never waited for.
type Broker struct {
	boot    string
	mu      sync.Mutex
	seq     uint64
	ring    []brokerEvent
	next    int // ring write position
	clients map[*subscriber]struct{}
	dropped atomic.Uint64
}

type brokerEvent struct {
	seq uint64
	ev  domain.Event
}

// subscriber is one SSE connection: events reach it through ch, or, for a
// subscriber that folds them as they come (the dashboard's stream), through
// sink, which the broker calls under its lock and which must not block.
type subscriber struct {
	filter eventFilter
	ch     chan brokerEvent
	sink   func(domain.Event)
	gone   chan struct{} // closed when the broker drops the subscriber
}

// eventFilter keeps the events a subscriber asked for; empty fields keep
// everything.
type eventFilter struct {
	jobID    uuid.UUID
	jobIDs   map[uuid.UUID]bool // when set, only these jobs
	types    []string
	statuses []jobs.State
	batchID  uuid.UUID // when set, only the batch's members, callbacks and settlement
}

func (f eventFilter) match(e domain.Event) bool {
	if f.batchID != uuid.Nil && (e.BatchID == nil || *e.BatchID != f.batchID) {
		return false
	}
	if e.Kind == domain.EventBatch {
		// A batch's settlement names no job: only unfiltered streams and
		// streams of its batch get it.
		return f.jobID == uuid.Nil && f.jobIDs == nil && len(f.types) == 0 && len(f.statuses) == 0
	}
	return (f.jobID == uuid.Nil || f.jobID == e.JobID) &&
		(f.jobIDs == nil || f.jobIDs[e.JobID]) &&
		(len(f.types) == 0 || slices.Contains(f.types, e.Type)) &&
		(len(f.statuses) == 0 || slices.Contains(f.statuses, e.Status))
}

// NewBroker returns a broker remembering the last ringSize events.
func NewBroker(ringSize int) *Broker {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Broker{boot: hex.EncodeToString(b[:]), ring: make([]brokerEvent, ringSize), clients: map[*subscriber]struct{}{}}
}

// Dropped counts subscribers dropped for being too slow.
func (b *Broker) Dropped() uint64 { return b.dropped.Load() }

// Subscribers returns how many clients are connected.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.clients)
}

// Deliver hands events to every matching subscriber. It never blocks.
func (b *Broker) Deliver(events []domain.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		b.seq++
		// Encoded only when a client of the event API writes it: most
		// events reach nobody but the ring and the dashboard's streams.
		be := brokerEvent{seq: b.seq, ev: e}
		b.ring[b.next] = be
		b.next = (b.next + 1) % len(b.ring)
		for s := range b.clients {
			if !s.filter.match(e) {
				continue
			}
			if s.sink != nil {
				s.sink(e)
				continue
			}
			select {
			case s.ch <- be:
			default:
				// Too slow: drop it. It reconnects with its last id and
				// replays from the ring, or resyncs.
				delete(b.clients, s)
				close(s.gone)
				b.dropped.Add(1)
			}
		}
	}
}

// id renders an event id: this broker's boot id and the sequence number.
func (b *Broker) id(seq uint64) string { return b.boot + "-" + strconv.FormatUint(seq, 10) }

// subscribe registers a subscriber. With lastID it also returns the
// matching events after it; resync is true when lastID cannot be resolved
// (another process, or older than the ring).
func (b *Broker) subscribe(f eventFilter, lastID string) (s *subscriber, replay []brokerEvent, resync bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s = &subscriber{filter: f, ch: make(chan brokerEvent, 512), gone: make(chan struct{})}
	b.clients[s] = struct{}{}
	if lastID == "" {
		return s, nil, false
	}
	boot, seqStr, ok := strings.Cut(lastID, "-")
	seq, err := strconv.ParseUint(seqStr, 10, 64)
	if !ok || err != nil || boot != b.boot || seq > b.seq {
		return s, nil, true
	}
	oldest := b.seq - min(b.seq, uint64(len(b.ring))) + 1
	if seq+1 < oldest {
		return s, nil, true
	}
	for n := seq + 1; n <= b.seq; n++ {
		be := b.ring[(b.next-int(b.seq-n)-1+len(b.ring))%len(b.ring)]
		if f.match(be.ev) {
			replay = append(replay, be)
		}
	}
	return s, replay, false
}

// subscribeSink registers a subscriber that receives events through sink.
func (b *Broker) subscribeSink(f eventFilter, sink func(domain.Event)) *subscriber {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := &subscriber{filter: f, sink: sink, gone: make(chan struct{})}
	b.clients[s] = struct{}{}
	return s
}

// unsubscribe removes a subscriber (if the broker has not dropped it).
func (b *Broker) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.clients[s]; ok {
		delete(b.clients, s)
		close(s.gone)
	}
}
