package scheduler

import (
	"math/bits"

	"github.com/flinthq/flint/internal/minheap"
)

// The timing wheel advancing: moving the position to a new second, and
// what passes over or comes within the hour as it moves.

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
