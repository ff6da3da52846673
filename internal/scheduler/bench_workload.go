package scheduler

// The workload, shared by RunBench and the Go benchmarks: generated once
// per size from the seed, so that every algorithm gets the same entries
// and operations.

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
)

// benchStart is the workload's fixed starting time.
var benchStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	benchSpread     = 2 * time.Hour    // RunAt of the initial entries: [start, start+spread)
	benchPopStep    = time.Minute      // pop phase: time advances this much when nothing is due
	benchPopBatch   = 100              // pop phase: PopDue's max
	benchMixedTick  = 1000             // mixed: operations per simulated second
	benchMixedAhead = 10 * time.Second // mixed: inserts are due within this
	benchMixedPop   = 4                // mixed: PopDue's max
)

type mixedKind uint8

const (
	mixedInsert mixedKind = iota
	mixedPop
	mixedRescore
	mixedCancel
)

// mixedOp is one scripted operation; idx points into workload.all.
type mixedOp struct {
	kind mixedKind
	idx  int32
	prio float64 // for mixedRescore
}

// workload is everything one size needs, generated once from the seed so
// that every algorithm gets the same operations.
type workload struct {
	n       int
	all     []Entry   // all[:n] the initial entries, then the mixed inserts
	rescore []int32   // the 10% aged, indexes into all
	cancel  []int32   // the N/2 cancelled
	script  []mixedOp // the mixed phase
	mixedN  int       // live entries after the script
}

func newWorkload(n int, seed int64) (*workload, error) {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	wl := &workload{n: n}
	wl.all = make([]Entry, n, n+n*65/100)
	for i := range n {
		wl.all[i] = benchEntry(rng, int32(i), benchStart.Add(time.Duration(rng.Int64N(int64(benchSpread)))))
	}
	perm := rng.Perm(n)
	wl.rescore = make([]int32, max(1, n/10))
	for i := range wl.rescore {
		wl.rescore[i] = int32(perm[i])
	}
	rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	wl.cancel = make([]int32, max(1, n/2))
	for i := range wl.cancel {
		wl.cancel[i] = int32(perm[i])
	}
	if err := wl.genScript(rng); err != nil {
		return nil, err
	}
	return wl, nil
}

// benchEntry makes an entry whose ID carries idx in its last four bytes
// (the rest random), so that a popped entry can be found in workload.all.
func benchEntry(rng *rand.Rand, idx int32, runAt time.Time) Entry {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[0:8], rng.Uint64())
	binary.BigEndian.PutUint32(id[8:12], rng.Uint32())
	binary.BigEndian.PutUint32(id[12:16], uint32(idx))
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return Entry{
		ID:        id,
		Priority:  1 + 2*rng.Float64(),
		RunAt:     runAt,
		CreatedAt: benchStart.Add(-time.Duration(rng.Int64N(int64(time.Hour)))),
	}
}

func benchIdx(id uuid.UUID) int32 { return int32(binary.BigEndian.Uint32(id[12:16])) }

// mixedNow is the simulated time at mixed operation i.
func mixedNow(i int) time.Time { return benchStart.Add(time.Duration(i/benchMixedTick) * time.Second) }

// genScript draws the mixed phase's operations. Which entries are live
// depends on what PopDue returned, so the script is simulated once on a
// heap index (both strategies return the same entries; the tests check
// that), and re-scores and removals always target live entries.
func (wl *workload) genScript(rng *rand.Rand) error {
	ix := newHeapIndex(benchStart)
	live := make([]int32, 0, wl.n*2)
	pos := make([]int32, wl.n, cap(wl.all)) // index in live, or -1
	prio := make([]float64, wl.n, cap(wl.all))
	for i := range wl.n {
		ix.Upsert(wl.all[i])
		pos[i] = int32(i)
		live = append(live, int32(i))
		prio[i] = wl.all[i].Priority
	}
	drop := func(idx int32) {
		p := pos[idx]
		last := live[len(live)-1]
		live[p] = last
		pos[last] = p
		live = live[:len(live)-1]
		pos[idx] = -1
	}
	wl.script = make([]mixedOp, wl.n)
	for i := range wl.script {
		now := mixedNow(i)
		x := rng.IntN(100)
		switch {
		case x < 60 || len(live) == 0:
			idx := int32(len(wl.all))
			e := benchEntry(rng, idx, now.Add(time.Duration(rng.Int64N(int64(benchMixedAhead)))))
			e.CreatedAt = now
			wl.all = append(wl.all, e)
			pos = append(pos, int32(len(live)))
			prio = append(prio, e.Priority)
			live = append(live, idx)
			ix.Upsert(e)
			wl.script[i] = mixedOp{kind: mixedInsert, idx: idx}
		case x < 85:
			for _, e := range ix.PopDue(now, benchMixedPop) {
				drop(benchIdx(e.ID))
			}
			wl.script[i] = mixedOp{kind: mixedPop}
		case x < 95:
			idx := live[rng.IntN(len(live))]
			prio[idx] = max(1, prio[idx]-0.1)
			e := wl.all[idx]
			e.Priority = prio[idx]
			ix.Upsert(e)
			wl.script[i] = mixedOp{kind: mixedRescore, idx: idx, prio: prio[idx]}
		default:
			idx := live[rng.IntN(len(live))]
			drop(idx)
			ix.Remove(wl.all[idx].ID)
			wl.script[i] = mixedOp{kind: mixedCancel, idx: idx}
		}
	}
	if ix.Len() != len(live) {
		return fmt.Errorf("bench script: index holds %d entries, expected %d", ix.Len(), len(live))
	}
	wl.mixedN = len(live)
	return nil
}
