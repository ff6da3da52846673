package scheduler

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// entryLess is the claim order on entries, written from its definition (see
// lessNode, the indexes' version of it), for the tests to check against.
func entryLess(a, b Entry) bool {
	if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
		return c < 0
	}
	if c := compareInstant(a.RunAt, b.RunAt); c != 0 {
		return c < 0
	}
	if c := compareInstant(a.CreatedAt, b.CreatedAt); c != 0 {
		return c < 0
	}
	return bytes.Compare(a.ID[:], b.ID[:]) < 0
}

func compareInstant(a, b time.Time) int {
	if c := cmp.Compare(a.Unix(), b.Unix()); c != 0 {
		return c
	}
	return cmp.Compare(a.Nanosecond(), b.Nanosecond())
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mustIndex(t *testing.T, strategy string, now time.Time) Index {
	t.Helper()
	ix, err := NewIndex(strategy, now)
	require.NoError(t, err)
	require.Equal(t, strategy, ix.Name())
	return ix
}

// id returns a UUID whose bytes sort by n.
func id(n uint64) uuid.UUID {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[8:], n)
	return u
}

func entry(n uint64, prio float64, runAt time.Time) Entry {
	return Entry{ID: id(n), Priority: prio, RunAt: runAt, CreatedAt: t0.Add(-time.Hour)}
}

func ids(es []Entry) []uuid.UUID {
	out := make([]uuid.UUID, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// requireNextDue checks that NextDue answers, and is never later than the
// earliest RunAt among want.
func requireNextDue(t *testing.T, ix Index, want ...Entry) {
	t.Helper()
	got, ok := ix.NextDue()
	if len(want) == 0 {
		require.False(t, ok, "empty index has no next due time")
		return
	}
	require.True(t, ok)
	earliest := want[0].RunAt
	for _, e := range want[1:] {
		if e.RunAt.Before(earliest) {
			earliest = e.RunAt
		}
	}
	require.False(t, got.After(earliest), "NextDue %v is later than the earliest RunAt %v", got, earliest)
}

func TestNewIndexRejectsUnknownStrategy(t *testing.T) {
	t.Parallel()
	_, err := NewIndex("fifo", t0)
	require.ErrorContains(t, err, `"fifo"`)
	require.ErrorContains(t, err, StrategyHeap)
	require.ErrorContains(t, err, StrategyTimingWheel)
}

func TestLess(t *testing.T) {
	t.Parallel()
	base := Entry{ID: id(5), Priority: 2, RunAt: t0, CreatedAt: t0.Add(-time.Minute)}
	with := func(f func(*Entry)) Entry { e := base; f(&e); return e }
	tests := []struct {
		name string
		a, b Entry
		less bool
	}{
		{"lower priority value first", with(func(e *Entry) { e.Priority = 1.9 }), base, true},
		{"higher priority value later", with(func(e *Entry) { e.Priority = 2.1; e.RunAt = t0.Add(-time.Hour) }), base, false},
		{"same priority: earlier run_at first", with(func(e *Entry) { e.RunAt = t0.Add(-time.Nanosecond) }), base, true},
		{"same run_at: earlier created_at first", with(func(e *Entry) { e.CreatedAt = base.CreatedAt.Add(-time.Nanosecond) }), base, true},
		{"all equal but id: smaller id first", with(func(e *Entry) { e.ID = id(4) }), base, true},
		{"id bytes decide, larger id later", with(func(e *Entry) { e.ID = id(6) }), base, false},
		{"an entry is not less than itself", base, base, false},
		{"monotonic readings are ignored", with(func(e *Entry) { e.RunAt = time.Now() }), with(func(e *Entry) { e.RunAt = time.Now().Round(0).Add(time.Hour) }), true},
		{"NaN priority sorts first", with(func(e *Entry) { e.Priority = math.NaN() }), with(func(e *Entry) { e.Priority = math.Inf(-1) }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.less, entryLess(tt.a, tt.b))
			if tt.less {
				require.False(t, entryLess(tt.b, tt.a), "entryLess must be asymmetric")
			}
			na, nb := makeNode(tt.a, 0), makeNode(tt.b, 0)
			require.Equal(t, tt.less, lessNode(&na, &nb), "node order must match entryLess")
		})
	}
}

// TestIndex is the behavioural suite (indexCases); every case runs
// against both strategies.
func TestIndex(t *testing.T) {
	t.Parallel()
	for _, strategy := range Strategies() {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			for _, tc := range indexCases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, mustIndex(t, strategy, t0))
				})
			}
		})
	}
}
