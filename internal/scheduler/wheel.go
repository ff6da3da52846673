package scheduler

// The timing-wheel strategy.
//
// The wheel is a ring of 3600 one-second slots. Slot i holds the entries
// whose RunAt falls in the second s with s mod 3600 == i, for the seconds
// [cur, cur+3600): the hour from the wheel's current position cur (the
// second of the index's clock). An entry whose RunAt has already passed
// when it is upserted goes to the current slot, from which the next PopDue
// takes it.
//
// Within a slot, entries are kept in claim order as a small binary min-heap
// (by the full claim key), so the slot's most urgent entry is always at
// index 0. Insert is O(log m) for m entries in the slot, O(1) on average;
// taking the most urgent is O(log m), within one contiguous slice. The
// alternative, a slice kept sorted by binary search and insertion, pops in
// O(1) but pays an O(m) copy per insert, and slots do get big: a million
// entries over two hours put ~140 in each, and a steady stream of work due
// within ten seconds piles ~600 into the slots just ahead. Measured on the
// benchmark workload (scheduler/bench.go), the per-slot heap was as fast at
// 10k and 100k entries except on the mixed workload (−20–30%), and at 1M
// faster everywhere: insert −23%, pop −9%, rescore −35%, mixed −13%.
//
// Entries an hour or more ahead go to the overflow: buckets of one second
// each (a map from the second to an unordered slice, O(1) append) and a
// min-heap of the bucket seconds, so the next bucket to enter the wheel is
// always known. When the position advances, every bucket whose second has
// come within the hour is heapified once (O(m)) and becomes its slot, which
// is necessarily still empty; buckets already in the past go straight to
// the due runs. Only bucket seconds pay O(log b), not every entry: a
// long-range entry costs an append now and its share of one heapify later.
// (A min-heap of the entries by RunAt would cost every one of them O(log n)
// twice, which is the heap strategy's price for everything.)
//
// PopDue advances the position to now. Every slot passed over is wholly
// due: its heap is moved, without copying, into "due", a min-heap of runs
// (slot heaps) keyed by each run's most urgent entry: a k-way merge. The
// current slot is partly due (now falls inside its second): its due entries
// are split off, in one O(m) pass, as one more run. Popping takes the top
// run's most urgent entry (O(log m) inside the run) and sifts that run
// down among the runs: O(log k) for k due runs, k at most about 3600 plus
// one per PopDue, independent of n. The occupied slots are a 3600-bit
// bitmap, so passing over empty slots costs a word test per 64 seconds, and
// a jump of a day or more touches each occupied slot once and never loops
// over the seconds.
//
// Re-scoring and cancelling use lazy deletion, as the heap does: an ID maps
// to its record (entry and version of its one live node); Upsert adds a new
// node (O(log m) into a slot, O(1) into the overflow) and Remove only
// deletes the record, O(1). Stale nodes are dropped when they are popped,
// and when they outnumber the live ones every slot, bucket and run is
// filtered and re-heapified in O(n + 3600), paid for by the n/2 operations
// that made them. Eager removal would need each node's position (which
// moves on every sift, and between slot, bucket and due run) or a search of
// its slot: O(m) per re-score, for nothing lazy deletion does not give.

import (
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/minheap"
)

const (
	wheelSlots = 3600
	wheelWords = (wheelSlots + 63) / 64
	// maxFreeNodes bounds the capacity, in nodes, of emptied slices kept
	// for reuse.
	maxFreeNodes = 1 << 16
	// A slot or bucket starts as a slice of smallCap nodes carved from a
	// chunk of chunkSlices of them: a sparse wheel (10k entries over two
	// hours is 1.4 per second) would otherwise allocate for nearly every
	// insert.
	smallCap    = 4
	chunkSlices = 64
)

type wheelIndex struct {
	recs  map[uuid.UUID]record
	ver   uint64
	clock instant
	cur   int64 // the second of the current slot: clock.sec
	nodes int   // nodes held anywhere, live and stale

	slots    [wheelSlots][]node  // min-heaps by the claim key
	slotMin  [wheelSlots]instant // at most the earliest RunAt in the slot
	occupied [wheelWords]uint64  // bit i: slots[i] is not empty

	// overflow: entries at cur+3600 or later, by second
	buckets    map[int64]int32 // second → index in bucketList
	bucketList [][]node
	freeBucket []int32
	bucketKeys []int64 // min-heap of the seconds in buckets

	due      [][]node // min-heap of runs (node heaps) by their top node
	dueFloor instant  // at most the earliest RunAt in due

	free      [][]node // emptied slices kept for reuse
	freeNodes int      // their total capacity
	chunk     []node   // carved into new small slices
}

func newWheelIndex(now time.Time) *wheelIndex {
	c := instantOf(now)
	return &wheelIndex{
		recs:     make(map[uuid.UUID]record),
		clock:    c,
		cur:      c.sec,
		buckets:  make(map[int64]int32),
		dueFloor: never,
	}
}

func (w *wheelIndex) Name() string { return StrategyTimingWheel }

func (w *wheelIndex) Len() int { return len(w.recs) }

func (w *wheelIndex) nodeCount() int { return w.nodes }

func slotOf(sec int64) int {
	return int((sec%wheelSlots + wheelSlots) % wheelSlots)
}

func (w *wheelIndex) Upsert(e Entry) {
	w.ver++
	w.recs[e.ID] = record{e: e, ver: w.ver}
	w.nodes++
	w.place(makeNode(e, w.ver))
	w.maybeCompact()
}

// place puts n in the current slot (already due), a slot of the hour
// ahead, or the overflow.
func (w *wheelIndex) place(n node) {
	sec := max(n.runSec, w.cur)
	if sec >= w.cur+wheelSlots {
		w.overflowAdd(sec, n)
		return
	}
	w.slotInsert(slotOf(sec), n)
}

func (w *wheelIndex) Remove(id uuid.UUID) bool {
	before := len(w.recs)
	delete(w.recs, id)
	if len(w.recs) == before {
		return false
	}
	w.maybeCompact()
	return true
}

func (w *wheelIndex) PopDue(now time.Time, max int) []Entry {
	if max <= 0 {
		return nil
	}
	w.advance(instantOf(now))
	w.splitCurrent()
	var out []Entry
	for len(w.due) > 0 && len(out) < max {
		r := w.due[0]
		var n node
		if n, r = minheap.Pop(r, lessNode); len(r) == 0 {
			w.popRun()
			w.putSlice(r)
		} else {
			w.due[0] = r
			minheap.Down(w.due, 0, runLess)
		}
		w.nodes--
		rec, ok := w.recs[n.id]
		if !ok || rec.ver != n.ver {
			continue // stale
		}
		delete(w.recs, n.id)
		if out == nil {
			out = make([]Entry, 0, min(max, len(w.recs)+1))
		}
		out = append(out, rec.e)
	}
	if len(w.due) == 0 {
		w.dueFloor = never
	}
	return out
}

func (w *wheelIndex) NextDue() (time.Time, bool) {
	if len(w.recs) == 0 {
		return time.Time{}, false
	}
	best := never
	if len(w.due) > 0 {
		best = w.dueFloor
	}
	// The first occupied slot from the current one holds the earliest
	// second in the wheel.
	if i, ok := w.firstOccupied(); ok && w.slotMin[i].before(best) {
		best = w.slotMin[i]
	}
	if len(w.bucketKeys) > 0 {
		if b := (instant{sec: w.bucketKeys[0]}); b.before(best) {
			best = b
		}
	}
	return best.time(), true
}
