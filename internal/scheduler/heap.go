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
// The heaps are flint/internal/minheap's, on []node slices: the sift loops
// the wheel's heaps use too, with pops bottom-up (5-9% faster at 1M).
// container/heap goes through an interface: an indirect call per
// comparison and swap, and Push/Pop box every 56-byte node into an `any`,
// two allocations per entry. Pushing and popping 10k (1M) nodes through it
// measured 293 (598) ns per entry against 131 (373) for direct sift loops,
// with 2 allocations per entry against none. minheap allocates nothing
// either, but takes the order as a func, so every comparison is a call:
// by the claim key, a call anyway, pushing and popping measured the same
// as loops written out for it (134 ns per entry at 10k, 445-462 at 1M);
// by RunAt alone, whose compare such loops inline, 130 (419) against 100
// (336). In BenchmarkIndex that is a few percent of the heap strategy's
// insert and pop at most, within the noise, and nothing for the wheel.

import (
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/minheap"
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
	minheap.Init(h.timer, timerLess)
	h.readyFloor = never
	for i := range h.ready {
		if r := h.ready[i].run(); r.before(h.readyFloor) {
			h.readyFloor = r
		}
	}
	minheap.Init(h.ready, lessNode)
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

// --- the timer heap, ordered by RunAt, and the ready heap, by the claim key ---

func timerLess(a, b *node) bool {
	return a.runSec < b.runSec || (a.runSec == b.runSec && a.runNsec < b.runNsec)
}

func (h *heapIndex) pushTimer(n node) { h.timer = minheap.Push(h.timer, n, timerLess) }

func (h *heapIndex) popTimer() node {
	n, s := minheap.Pop(h.timer, timerLess)
	h.timer = s
	return n
}

func (h *heapIndex) pushReady(n node) {
	if r := n.run(); r.before(h.readyFloor) {
		h.readyFloor = r
	}
	h.ready = minheap.Push(h.ready, n, lessNode)
}

func (h *heapIndex) popReady() node {
	n, s := minheap.Pop(h.ready, lessNode)
	h.ready = s
	return n
}
