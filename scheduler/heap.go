package scheduler

// The heap strategy.
//
// One min-heap keyed by (Priority, RunAt, CreatedAt, ID) orders entries the
// way the claim does, but it cannot answer "what is due": a future entry of
// priority 1 sits at the top above a due entry of priority 2, and the due one
// can only be found by searching the whole heap. So the index is TWO binary
// min-heaps:
//
//	timer  keyed by RunAt only: entries not yet due. Its top is the next
//	       entry to become due, which is also what NextDue needs.
//	ready  keyed by the full claim key: entries already due.
//
// PopDue first moves every timer entry with RunAt <= now into ready (one
// pop and one push each, O(log n)), then pops ready in order. An Upsert
// whose RunAt has already come goes straight to ready. Every entry crosses
// from timer to ready at most once, so the amortised cost per entry is a
// push, a move and a pop: O(log n) each.
//
// Re-scoring and cancelling use lazy deletion: an ID maps to its record
// (the entry and the version of its one live node). Upsert pushes a new
// node with a new version and rewrites the record; Remove deletes the
// record. The old node stays where it is, stale, and is discarded when the
// ready heap pops it (NextDue also drops stale timer tops). Both are
// O(log n) with no search. Stale nodes cost memory, so when they outnumber
// the live ones (more than half the heap) both heaps are filtered and
// re-heapified in O(n), which the at least n/2 operations since the last
// compaction pay for: memory stays within about twice the live entries.
//
// The heaps are hand-written sift-up/sift-down on []node slices. container/heap
// goes through an interface: an indirect call per comparison and swap, and
// Push/Pop box every 56-byte node into an `any`, two allocations per entry.
// Pushing and popping 10k (1M) nodes through it measured 293 (598) ns per
// entry against 131 (373) for these, with 2 allocations per entry against
// none. Pops are bottom-up (see nodePop in wheel.go): 5-9% faster at 1M.

import (
	"time"

	"github.com/google/uuid"
)

type heapIndex struct {
	recs  map[uuid.UUID]record
	timer []node // min-heap by RunAt: not due when pushed
	ready []node // min-heap by the full key: due
	clock instant
	ver   uint64
	// readyFloor is at most the earliest RunAt in ready (the least RunAt of
	// any node pushed since ready was last empty), for NextDue.
	readyFloor instant
}

func newHeapIndex(now time.Time) *heapIndex {
	return &heapIndex{recs: make(map[uuid.UUID]record), clock: instantOf(now), readyFloor: never}
}

func (h *heapIndex) Name() string { return StrategyHeap }

func (h *heapIndex) Len() int { return len(h.recs) }

func (h *heapIndex) nodeCount() int { return len(h.timer) + len(h.ready) }

func (h *heapIndex) Upsert(e Entry) {
	h.ver++
	h.recs[e.ID] = record{e: e, ver: h.ver}
	n := makeNode(e, h.ver)
	if n.dueBy(h.clock) {
		h.pushReady(n)
	} else {
		h.pushTimer(n)
	}
	h.maybeCompact()
}

func (h *heapIndex) Remove(id uuid.UUID) bool {
	before := len(h.recs)
	delete(h.recs, id)
	if len(h.recs) == before {
		return false
	}
	h.maybeCompact()
	return true
}

func (h *heapIndex) live(n *node) bool {
	r, ok := h.recs[n.id]
	return ok && r.ver == n.ver
}

func (h *heapIndex) PopDue(now time.Time, max int) []Entry {
	if max <= 0 {
		return nil
	}
	if t := instantOf(now); h.clock.before(t) {
		h.clock = t
	}
	// Stale timer nodes move too and are dropped when ready pops them:
	// checking here would cost a map lookup for every live one (7-10%).
	for len(h.timer) > 0 && h.timer[0].dueBy(h.clock) {
		h.pushReady(h.popTimer())
	}
	var out []Entry
	for len(h.ready) > 0 && len(out) < max {
		n := h.popReady()
		r, ok := h.recs[n.id]
		if !ok || r.ver != n.ver {
			continue // stale
		}
		delete(h.recs, n.id)
		if out == nil {
			out = make([]Entry, 0, min(max, len(h.recs)+1))
		}
		out = append(out, r.e)
	}
	if len(h.ready) == 0 {
		h.readyFloor = never
	}
	return out
}

func (h *heapIndex) NextDue() (time.Time, bool) {
	if len(h.recs) == 0 {
		return time.Time{}, false
	}
	// Discard stale timer tops so the answer is not needlessly early.
	for len(h.timer) > 0 && !h.live(&h.timer[0]) {
		h.popTimer()
	}
	best := h.readyFloor
	if len(h.timer) > 0 && h.timer[0].run().before(best) {
		best = h.timer[0].run()
	}
	return best.time(), true
}

func (h *heapIndex) maybeCompact() {
	if !needsCompaction(len(h.timer)+len(h.ready), len(h.recs)) {
		return
	}
	h.timer = h.filterLive(h.timer)
	h.ready = h.filterLive(h.ready)
	for i := len(h.timer)/2 - 1; i >= 0; i-- {
		h.downTimer(i)
	}
	h.readyFloor = never
	for i := range h.ready {
		if r := h.ready[i].run(); r.before(h.readyFloor) {
			h.readyFloor = r
		}
	}
	for i := len(h.ready)/2 - 1; i >= 0; i-- {
		h.downReady(i)
	}
}

// filterLive keeps the live nodes of s, in place, and clears the tail.
func (h *heapIndex) filterLive(s []node) []node {
	kept := s[:0]
	for i := range s {
		if h.live(&s[i]) {
			kept = append(kept, s[i])
		}
	}
	clear(s[len(kept):])
	return kept
}

// --- the timer heap: ordered by RunAt ---
//
// Same sift loops as nodePush/nodePop, written out again for this ordering:
// a comparator passed as a func or through a type parameter is an indirect
// call per comparison, which is what the hand-written heaps exist to avoid.

func timerLess(a, b *node) bool {
	return a.runSec < b.runSec || (a.runSec == b.runSec && a.runNsec < b.runNsec)
}

func (h *heapIndex) pushTimer(n node) {
	h.timer = append(h.timer, n)
	s := h.timer
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !timerLess(&n, &s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = n
}

func (h *heapIndex) popTimer() node {
	s := h.timer
	top := s[0]
	last := len(s) - 1
	x := s[last]
	s = s[:last]
	h.timer = s
	i := 0
	for {
		c := 2*i + 1
		if c >= last {
			break
		}
		if r := c + 1; r < last && timerLess(&s[r], &s[c]) {
			c = r
		}
		s[i] = s[c]
		i = c
	}
	for i > 0 {
		p := (i - 1) / 2
		if !timerLess(&x, &s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	if last > 0 {
		s[i] = x
	}
	return top
}

func (h *heapIndex) downTimer(i int) {
	s := h.timer
	n := s[i]
	for {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if r := c + 1; r < len(s) && timerLess(&s[r], &s[c]) {
			c = r
		}
		if !timerLess(&s[c], &n) {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = n
}

// --- the ready heap: ordered by the full claim key ---

func (h *heapIndex) pushReady(n node) {
	if r := n.run(); r.before(h.readyFloor) {
		h.readyFloor = r
	}
	h.ready = nodePush(h.ready, n)
}

func (h *heapIndex) popReady() node {
	n, s := nodePop(h.ready)
	h.ready = s
	return n
}

func (h *heapIndex) downReady(i int) {
	s := h.ready
	n := s[i]
	for {
		c := 2*i + 1
		if c >= len(s) {
			break
		}
		if r := c + 1; r < len(s) && lessNode(&s[r], &s[c]) {
			c = r
		}
		if !lessNode(&s[c], &n) {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = n
}
