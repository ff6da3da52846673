package scheduler

import (
	"bytes"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

// Entry is a job waiting in the in-memory index.
type Entry struct {
	ID        uuid.UUID // the job's id; one entry per job
	Priority  float64   // effective priority, 1.0 (high) .. 3.0 (low)
	RunAt     time.Time // when it becomes due
	CreatedAt time.Time // breaks ties between equal priorities and RunAt
}

// Index holds scheduled work and hands out what is due, most urgent first.
// Implementations are NOT safe for concurrent use (the owner locks).
//
// An index keeps its own clock: the latest now it has seen (NewIndex's, then
// every PopDue's). The clock never goes back: a PopDue whose now is earlier
// than an earlier call's acts at the later time, so an entry that was due
// once stays due, as it does in the database once promoted.
type Index interface {
	// Upsert adds e, or replaces the entry with the same ID (re-score or
	// reschedule). An entry whose RunAt has already come is due at once.
	Upsert(e Entry)
	// Remove cancels the entry with this ID; false when absent.
	Remove(id uuid.UUID) bool
	// PopDue removes and returns up to max entries with RunAt <= now,
	// in claim order: lower Priority, then earlier RunAt, then earlier
	// CreatedAt, then the ID's bytes (see lessNode). The rest stay for the
	// next call. It returns nil when nothing is due or max <= 0.
	PopDue(now time.Time, max int) []Entry
	// NextDue returns the earliest RunAt in the index (for sleeping until
	// then). It may be conservative (earlier than the true earliest) but is
	// never later; false when the index is empty.
	NextDue() (time.Time, bool)
	// Len is the number of live entries (lazily deleted ones not counted).
	Len() int
	// Name is the strategy: StrategyHeap or StrategyTimingWheel.
	Name() string
}

// The strategies NewIndex knows; the scheduler_strategy setting holds one.
const (
	StrategyHeap        = domain.StrategyHeap
	StrategyTimingWheel = domain.StrategyTimingWheel
)

// Strategies lists the valid strategies in a stable order.
func Strategies() []string { return []string{StrategyHeap, StrategyTimingWheel} }

// NewIndex returns an empty index of the given strategy whose clock starts
// at now.
func NewIndex(strategy string, now time.Time) (Index, error) {
	switch strategy {
	case StrategyHeap:
		return newHeapIndex(now), nil
	case StrategyTimingWheel:
		return newWheelIndex(now), nil
	}
	return nil, fmt.Errorf("unknown scheduling strategy %q (valid: %q, %q)", strategy, StrategyHeap, StrategyTimingWheel)
}

// node is an entry as the strategies store it: the sort key in a form that
// compares with integer instructions only (no time.Time decoding, exact for
// every representable time), the ID, and the version that tells a live node
// from a lazily deleted one. 56 bytes.
type node struct {
	prio    uint64 // order-preserving encoding of Priority (prioKey)
	runSec  int64  // RunAt: Unix seconds (floor) ...
	runNsec int32  // ... and nanoseconds within that second
	crNsec  int32  // CreatedAt, likewise
	crSec   int64
	id      uuid.UUID
	ver     uint64 // matches record.ver while the node is live
}

// record is the live state of one ID: the entry to hand out and the version
// of the one node that represents it. Every other node for the ID is stale.
//
// Both strategies keep records in a map by ID. Keeping them in a paged
// array instead, with the map holding only a slot number that nodes carry
// too (so liveness needs no hash lookup), was measured: no faster to insert
// once the heaps are counted, and pop, cancel and mixed 5-30% slower, the
// nodes having grown to 64 bytes.
type record struct {
	e   Entry
	ver uint64
}

func makeNode(e Entry, ver uint64) node {
	return node{
		prio:    prioKey(e.Priority),
		runSec:  e.RunAt.Unix(),
		runNsec: int32(e.RunAt.Nanosecond()),
		crSec:   e.CreatedAt.Unix(),
		crNsec:  int32(e.CreatedAt.Nanosecond()),
		id:      e.ID,
		ver:     ver,
	}
}

// prioKey maps a float64 to a uint64 with the same order as cmp.Compare:
// NaN first, -0 equal to +0.
func prioKey(f float64) uint64 {
	if f != f {
		return 0
	}
	if f == 0 {
		f = 0 // -0 → +0
	}
	b := math.Float64bits(f)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// lessNode reports whether a comes before b in claim order: lower
// Priority, then earlier RunAt, then earlier CreatedAt, then the ID's bytes.
// Times compare as wall-clock instants (monotonic readings are ignored, so
// the order is the same whatever clock produced them). A NaN priority sorts
// before every number, as cmp.Compare has it, so the order stays total.
func lessNode(a, b *node) bool {
	if a.prio != b.prio {
		return a.prio < b.prio
	}
	if a.runSec != b.runSec {
		return a.runSec < b.runSec
	}
	if a.runNsec != b.runNsec {
		return a.runNsec < b.runNsec
	}
	if a.crSec != b.crSec {
		return a.crSec < b.crSec
	}
	if a.crNsec != b.crNsec {
		return a.crNsec < b.crNsec
	}
	return bytes.Compare(a.id[:], b.id[:]) < 0
}

// instant is a wall-clock time as (Unix seconds, nanoseconds), ordered.
type instant struct {
	sec  int64
	nsec int32
}

// never is later than every representable time.
var never = instant{math.MaxInt64, 0}

func instantOf(t time.Time) instant { return instant{t.Unix(), int32(t.Nanosecond())} }

func (a instant) before(b instant) bool {
	return a.sec < b.sec || (a.sec == b.sec && a.nsec < b.nsec)
}

func (a instant) time() time.Time { return time.Unix(a.sec, int64(a.nsec)).UTC() }

func (n *node) run() instant { return instant{n.runSec, n.runNsec} }

// dueBy reports whether n's RunAt <= t.
func (n *node) dueBy(t instant) bool {
	return n.runSec < t.sec || (n.runSec == t.sec && n.runNsec <= t.nsec)
}

// compactMin is the number of stale nodes below which neither strategy
// bothers to compact: a small index wastes little.
const compactMin = 64

// needsCompaction reports whether stale nodes (total - live) exceed half of
// all nodes, that is the live ones, and are worth a pass.
func needsCompaction(total, live int) bool {
	stale := total - live
	return stale > live && stale > compactMin
}
