package logs

import (
	"sync"
)

// RingSize is how many recent entries a Tail keeps.
const RingSize = 200

// Tail keeps the last RingSize log entries, already scrubbed, numbered in
// the order they were recorded, for the live log page to poll (Since).
// Recording a line copies it and nothing more: it is parsed only when read.
type Tail struct {
	mu   sync.Mutex
	ring [RingSize][]byte // raw JSON lines
	next int              // ring index of the next write
	n    int              // lines in the ring
	seq  uint64           // lines recorded so far; the newest has this number
}

// NewTail returns an empty Tail. A Logger has its own (Logger.Tail).
func NewTail() *Tail { return &Tail{} }

// publishLine records one JSON log line (as written to the file). The line
// is copied.
func (t *Tail) publishLine(line []byte) {
	raw := make([]byte, len(line))
	copy(raw, line)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	t.ring[t.next] = raw
	t.next = (t.next + 1) % RingSize
	if t.n < RingSize {
		t.n++
	}
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
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = t.ring[(t.next-n+i+RingSize)%RingSize]
	}
	t.mu.Unlock()
	for _, line := range lines {
		e, ok := parseEntry(line)
		if ok && (filter == nil || filter(e)) {
			entries = append(entries, e)
		}
	}
	if limit > 0 && len(entries) > limit {
		entries, missed = entries[len(entries)-limit:], true
	}
	return entries, seq, missed
}
