package logs

import (
	"sync"
)

// RingSize is how many recent entries a Tail keeps for Recent.
const RingSize = 200

// Tail broadcasts log entries, already scrubbed, to in-process subscribers
// (the live-tail stream) and keeps the last RingSize of them.
//
// Publishing never blocks: a subscriber whose buffer is full is dropped —
// its channel is closed by the Tail and it receives nothing more; it may
// subscribe again. All sends and closes happen under one mutex, so nothing
// is ever sent on a closed channel and cancel may be called at any time,
// any number of times.
//
// Filters run on the logging path while the log output is locked: they
// must be fast and must not log.
type Tail struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	ring   [RingSize]ringItem
	next   int    // ring index of the next write
	n      int    // entries in the ring
	seq    uint64 // entries pushed so far; the newest has this number
	closed bool
}

type subscriber struct {
	ch     chan Entry
	filter func(Entry) bool
}

// ringItem holds either a parsed entry or the raw JSON line it will be
// parsed from on demand (parsing is skipped on the logging path when no one
// is subscribed).
type ringItem struct {
	raw   []byte
	entry *Entry
}

// NewTail returns an empty Tail. A Logger has its own (Logger.Tail).
func NewTail() *Tail {
	return &Tail{subs: make(map[*subscriber]struct{})}
}

// Subscribe registers a subscriber for entries published from now on that
// pass filter (nil: all). buffer is the channel capacity (minimum 1,
// default 64 when ≤ 0); when it is full the subscriber is dropped and ch
// closed. cancel unsubscribes and closes ch; it is idempotent.
func (t *Tail) Subscribe(filter func(Entry) bool, buffer int) (ch <-chan Entry, cancel func()) {
	if buffer <= 0 {
		buffer = 64
	}
	s := &subscriber{ch: make(chan Entry, buffer), filter: filter}
	t.mu.Lock()
	if t.closed {
		close(s.ch)
	} else {
		t.subs[s] = struct{}{}
	}
	t.mu.Unlock()
	return s.ch, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.removeLocked(s)
	}
}

// removeLocked closes s's channel once.
func (t *Tail) removeLocked(s *subscriber) {
	if _, ok := t.subs[s]; ok {
		delete(t.subs, s)
		close(s.ch)
	}
}

// Subscribers returns the number of current subscribers.
func (t *Tail) Subscribers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs)
}

// Publish delivers e to the ring and to every subscriber whose filter
// accepts it, without blocking.
func (t *Tail) Publish(e Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pushLocked(ringItem{entry: &e})
	t.deliverLocked(e)
}

// publishLine records one JSON log line (as written to the file). The line
// is copied; it is parsed only if someone is subscribed.
func (t *Tail) publishLine(line []byte) {
	raw := make([]byte, len(line))
	copy(raw, line)
	t.mu.Lock()
	defer t.mu.Unlock()
	item := ringItem{raw: raw}
	if len(t.subs) > 0 {
		e, ok := parseEntry(raw)
		if !ok {
			return
		}
		item.entry = &e
		t.deliverLocked(e)
	}
	t.pushLocked(item)
}

func (t *Tail) pushLocked(item ringItem) {
	t.seq++
	t.ring[t.next] = item
	t.next = (t.next + 1) % RingSize
	if t.n < RingSize {
		t.n++
	}
}

func (t *Tail) deliverLocked(e Entry) {
	for s := range t.subs {
		if s.filter != nil && !s.filter(e) {
			continue
		}
		select {
		case s.ch <- e:
		default:
			// Too slow: drop it rather than hold up logging.
			t.removeLocked(s)
		}
	}
}

// Recent returns up to n of the most recent entries (n ≤ 0 or > RingSize:
// all kept), oldest first, ready to be shown before live entries arrive.
func (t *Tail) Recent(n int) []Entry { return t.RecentMatching(n, nil) }

// RecentMatching is Recent restricted to entries that pass filter (nil: all).
func (t *Tail) RecentMatching(n int, filter func(Entry) bool) []Entry {
	if n <= 0 || n > RingSize {
		n = RingSize
	}
	t.mu.Lock()
	items := make([]ringItem, t.n)
	start := (t.next - t.n + RingSize) % RingSize
	for i := range items {
		items[i] = t.ring[(start+i)%RingSize]
	}
	t.mu.Unlock()

	out := make([]Entry, 0, min(n, len(items)))
	for i := len(items) - 1; i >= 0 && len(out) < n; i-- {
		e, ok := items[i].parsed()
		if ok && (filter == nil || filter(e)) {
			out = append(out, e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Seq numbers the newest entry (0 before the first): entries are numbered
// 1, 2, … as they are recorded.
func (t *Tail) Seq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// Since returns the entries recorded after entry number after that pass
// filter (nil: all), oldest first, at most limit of the newest of them
// (limit ≤ 0: all kept), with the number of the newest entry recorded.
// missed is true when entries after it have already left the ring.
func (t *Tail) Since(after uint64, filter func(Entry) bool, limit int) (entries []Entry, seq uint64, missed bool) {
	t.mu.Lock()
	seq = t.seq
	if after >= seq {
		t.mu.Unlock()
		return nil, seq, false
	}
	n := int(min(seq-after, uint64(t.n)))
	missed = seq-after > uint64(t.n)
	items := make([]ringItem, n)
	for i := range items {
		items[i] = t.ring[(t.next-n+i+RingSize)%RingSize]
	}
	t.mu.Unlock()
	for _, it := range items {
		e, ok := it.parsed()
		if ok && (filter == nil || filter(e)) {
			entries = append(entries, e)
		}
	}
	if limit > 0 && len(entries) > limit {
		entries, missed = entries[len(entries)-limit:], true
	}
	return entries, seq, missed
}

// parsed returns the item's entry, parsing its line if need be.
func (it ringItem) parsed() (Entry, bool) {
	if it.entry != nil {
		return *it.entry, true
	}
	return parseEntry(it.raw)
}

// close drops every subscriber (their channels close) and refuses new ones.
func (t *Tail) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for s := range t.subs {
		t.removeLocked(s)
	}
}
