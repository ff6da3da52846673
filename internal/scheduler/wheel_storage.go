package scheduler

import (
	"math/bits"

	"github.com/flinthq/flint/internal/minheap"
)

// The timing wheel's storage: slot heaps, overflow buckets, due runs,
// the reuse of their slices, and lazy deletion of stale nodes.

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
