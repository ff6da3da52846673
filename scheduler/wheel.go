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
	"math/bits"
	"time"

	"github.com/google/uuid"

	"flint/internal/minheap"
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

// --- advancing ---

// advance moves the clock to t (never back) and the position to t's
// second: slots passed over become due runs, overflow buckets that came
// within the hour enter the wheel.
func (w *wheelIndex) advance(t instant) {
	if !w.clock.before(t) {
		return
	}
	w.clock = t
	if t.sec <= w.cur {
		return
	}
	if t.sec >= w.cur+wheelSlots {
		w.flushRange(0, wheelSlots)
	} else {
		start := slotOf(w.cur)
		end := start + int(t.sec-w.cur)
		if end <= wheelSlots {
			w.flushRange(start, end)
		} else {
			w.flushRange(start, wheelSlots)
			w.flushRange(0, end-wheelSlots)
		}
	}
	w.cur = t.sec
	w.migrate()
}

// flushRange turns the occupied slots in [lo, hi) into due runs.
func (w *wheelIndex) flushRange(lo, hi int) {
	for wi := lo / 64; wi <= (hi-1)/64; wi++ {
		word := w.occupied[wi]
		if base := wi * 64; base < lo {
			word &= ^uint64(0) << (lo - base)
		}
		if end := (wi + 1) * 64; end > hi {
			word &= ^uint64(0) >> (end - hi)
		}
		for word != 0 {
			i := wi*64 + bits.TrailingZeros64(word)
			word &= word - 1
			s := w.slots[i]
			w.slots[i] = nil
			w.occupied[i/64] &^= 1 << (i % 64)
			w.pushRun(s, w.slotMin[i])
		}
	}
}

// migrate moves the overflow buckets that are now within the hour into
// their slots (or, when already past, into the due runs).
func (w *wheelIndex) migrate() {
	limit := w.cur + wheelSlots
	for len(w.bucketKeys) > 0 && w.bucketKeys[0] < limit {
		sec := w.popBucketKey()
		bi := w.buckets[sec]
		delete(w.buckets, sec)
		s := w.bucketList[bi]
		w.bucketList[bi] = nil
		w.freeBucket = append(w.freeBucket, bi)
		if len(s) == 0 {
			w.putSlice(s)
			continue
		}
		minheap.Init(s, lessNode)
		floor := instant{sec: sec}
		if sec < w.cur {
			w.pushRun(s, floor)
			continue
		}
		i := slotOf(sec)
		if len(w.slots[i]) == 0 {
			// The slot's second entered the hour only now, so nothing
			// can be in it yet; the loop below is a safeguard.
			w.putSlice(w.slots[i])
			w.slots[i] = s
			w.slotMin[i] = floor
			w.occupied[i/64] |= 1 << (i % 64)
			continue
		}
		for k := range s {
			w.slotInsert(i, s[k])
		}
		w.putSlice(s)
	}
}

// splitCurrent moves the due entries of the current slot into a due run of
// their own; the rest stay. Both are re-heapified: O(m).
func (w *wheelIndex) splitCurrent() {
	i := slotOf(w.cur)
	s := w.slots[i]
	if len(s) == 0 || w.clock.before(w.slotMin[i]) {
		return
	}
	due := w.getSlice()
	keep := s[:0]
	dueFloor, keepFloor := never, never
	for k := range s {
		n := s[k]
		if r := n.run(); n.dueBy(w.clock) {
			due = append(due, n)
			if r.before(dueFloor) {
				dueFloor = r
			}
		} else {
			keep = append(keep, n)
			if r.before(keepFloor) {
				keepFloor = r
			}
		}
	}
	minheap.Init(keep, lessNode)
	minheap.Init(due, lessNode)
	w.slots[i] = keep
	w.slotMin[i] = keepFloor
	if len(keep) == 0 {
		w.occupied[i/64] &^= 1 << (i % 64)
	}
	w.pushRun(due, dueFloor)
}

// firstOccupied returns the occupied slot with the earliest second.
func (w *wheelIndex) firstOccupied() (int, bool) {
	start := slotOf(w.cur)
	if i, ok := w.nextOccupied(start, wheelSlots); ok {
		return i, true
	}
	return w.nextOccupied(0, start)
}

// nextOccupied returns the first occupied slot in [lo, hi).
func (w *wheelIndex) nextOccupied(lo, hi int) (int, bool) {
	for wi := lo / 64; lo < hi && wi < wheelWords; wi++ {
		word := w.occupied[wi]
		if base := wi * 64; base < lo {
			word &= ^uint64(0) << (lo - base)
		}
		if word != 0 {
			if i := wi*64 + bits.TrailingZeros64(word); i < hi {
				return i, true
			}
			return 0, false
		}
	}
	return 0, false
}

// --- slots ---

// slotInsert pushes n onto slot i's heap.
func (w *wheelIndex) slotInsert(i int, n node) {
	s := w.slots[i]
	if len(s) == 0 {
		if s == nil {
			s = w.getSlice()
		}
		w.occupied[i/64] |= 1 << (i % 64)
		w.slotMin[i] = never
	}
	if r := n.run(); r.before(w.slotMin[i]) {
		w.slotMin[i] = r
	}
	w.slots[i] = minheap.Push(s, n, lessNode)
}

// --- overflow buckets ---

func (w *wheelIndex) overflowAdd(sec int64, n node) {
	bi, ok := w.buckets[sec]
	if !ok {
		if k := len(w.freeBucket); k > 0 {
			bi = w.freeBucket[k-1]
			w.freeBucket = w.freeBucket[:k-1]
		} else {
			bi = int32(len(w.bucketList))
			w.bucketList = append(w.bucketList, nil)
		}
		w.bucketList[bi] = w.getSlice()
		w.buckets[sec] = bi
		w.pushBucketKey(sec)
	}
	w.bucketList[bi] = append(w.bucketList[bi], n)
}

func secLess(a, b *int64) bool { return *a < *b }

func (w *wheelIndex) pushBucketKey(sec int64) {
	w.bucketKeys = minheap.Push(w.bucketKeys, sec, secLess)
}

func (w *wheelIndex) popBucketKey() int64 {
	sec, s := minheap.Pop(w.bucketKeys, secLess)
	w.bucketKeys = s
	return sec
}

// --- due runs: a min-heap of node heaps, by their top node ---

func runLess(a, b *[]node) bool { return lessNode(&(*a)[0], &(*b)[0]) }

// pushRun adds a run (a node heap) whose earliest RunAt is at least floor;
// an empty one is recycled.
func (w *wheelIndex) pushRun(r []node, floor instant) {
	if len(r) == 0 {
		w.putSlice(r)
		return
	}
	if floor.before(w.dueFloor) {
		w.dueFloor = floor
	}
	w.due = minheap.Push(w.due, r, runLess)
}

// popRun drops the top run, which the caller has emptied or taken.
func (w *wheelIndex) popRun() {
	_, w.due = minheap.Pop(w.due, runLess)
	clear(w.due[len(w.due) : len(w.due)+1]) // keep no reference to it
}

// --- slice reuse ---

func (w *wheelIndex) getSlice() []node {
	if k := len(w.free); k > 0 {
		s := w.free[k-1]
		w.free[k-1] = nil
		w.free = w.free[:k-1]
		w.freeNodes -= cap(s)
		return s
	}
	if len(w.chunk) < smallCap {
		w.chunk = make([]node, smallCap*chunkSlices)
	}
	s := w.chunk[:0:smallCap]
	w.chunk = w.chunk[smallCap:]
	return s
}

func (w *wheelIndex) putSlice(s []node) {
	if cap(s) == 0 || w.freeNodes+cap(s) > maxFreeNodes {
		return
	}
	w.freeNodes += cap(s)
	w.free = append(w.free, s[:0])
}

// --- lazy deletion ---

func (w *wheelIndex) live(n *node) bool {
	r, ok := w.recs[n.id]
	return ok && r.ver == n.ver
}

func (w *wheelIndex) filterLive(s []node) []node {
	kept := s[:0]
	for k := range s {
		if w.live(&s[k]) {
			kept = append(kept, s[k])
		}
	}
	return kept
}

func (w *wheelIndex) maybeCompact() {
	if !needsCompaction(w.nodes, len(w.recs)) {
		return
	}
	total := 0
	for wi := range w.occupied {
		for word := w.occupied[wi]; word != 0; word &= word - 1 {
			i := wi*64 + bits.TrailingZeros64(word)
			s := w.filterLive(w.slots[i])
			minheap.Init(s, lessNode)
			w.slots[i] = s
			if len(s) == 0 {
				w.occupied[wi] &^= 1 << (i % 64)
			}
			total += len(s)
		}
	}
	for _, bi := range w.buckets {
		s := w.filterLive(w.bucketList[bi])
		w.bucketList[bi] = s
		total += len(s)
	}
	runs := w.due[:0]
	w.dueFloor = never
	for _, r := range w.due {
		r = w.filterLive(r)
		minheap.Init(r, lessNode)
		if len(r) == 0 {
			w.putSlice(r)
			continue
		}
		for k := range r {
			if x := r[k].run(); x.before(w.dueFloor) {
				w.dueFloor = x
			}
		}
		runs = append(runs, r)
		total += len(r)
	}
	clear(w.due[len(runs):])
	w.due = runs
	minheap.Init(w.due, runLess)
	w.nodes = total
}
