package scheduler

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// TestIndex is the behavioural suite; every case runs against both
// strategies.
func TestIndex(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, ix Index)
	}{
		{"orders due entries by priority, run_at, created_at, id", func(t *testing.T, ix Index) {
			mk := func(n uint64, prio float64, run, created time.Duration) Entry {
				return Entry{ID: id(n), Priority: prio, RunAt: t0.Add(run), CreatedAt: t0.Add(created)}
			}
			want := []Entry{
				mk(9, 1, -90*time.Minute, -3*time.Hour), // beyond the wheel's hour, in the past
				mk(3, 1, -10*time.Second, -2*time.Hour),
				mk(7, 1, -10*time.Second+time.Nanosecond, -3*time.Hour),
				mk(2, 1, -time.Second, -2*time.Hour),
				mk(1, 1, -time.Second, -time.Hour),
				mk(8, 1, -time.Second, -time.Hour),
				mk(4, 1.9, -20*time.Minute, -time.Hour),
				mk(5, 2, -30*time.Second, -time.Hour),
				mk(6, 2, 0, -time.Hour), // due exactly now
				mk(10, 3, -2*time.Hour, -time.Hour),
			}
			order := []int{5, 9, 0, 3, 7, 1, 6, 2, 8, 4}
			for _, k := range order {
				ix.Upsert(want[k])
			}
			require.Equal(t, len(want), ix.Len())
			got := ix.PopDue(t0, 100)
			require.Equal(t, ids(want), ids(got))
			require.Equal(t, want, got, "entries come back unchanged")
			require.True(t, slices.IsSortedFunc(got, func(a, b Entry) int {
				if entryLess(a, b) {
					return -1
				}
				return 1
			}))
			require.Zero(t, ix.Len())
			require.Nil(t, ix.PopDue(t0, 100))
		}},
		{"returns nothing before it is due", func(t *testing.T, ix Index) {
			soon := entry(1, 1, t0.Add(1500*time.Millisecond))
			later := entry(2, 1, t0.Add(10*time.Minute))
			much := entry(3, 1, t0.Add(2*time.Hour))
			for _, e := range []Entry{soon, later, much} {
				ix.Upsert(e)
			}
			require.Nil(t, ix.PopDue(t0, 10))
			require.Nil(t, ix.PopDue(t0.Add(1500*time.Millisecond-time.Nanosecond), 10))
			require.Equal(t, []Entry{soon}, ix.PopDue(t0.Add(1500*time.Millisecond), 10))
			require.Nil(t, ix.PopDue(t0.Add(10*time.Minute-time.Nanosecond), 10))
			require.Equal(t, []Entry{later}, ix.PopDue(t0.Add(10*time.Minute), 10))
			require.Nil(t, ix.PopDue(t0.Add(2*time.Hour-time.Nanosecond), 10))
			require.Equal(t, 1, ix.Len())
			require.Equal(t, []Entry{much}, ix.PopDue(t0.Add(3*time.Hour), 10))
			require.Zero(t, ix.Len())
		}},
		{"max is respected and the rest comes next call", func(t *testing.T, ix Index) {
			rng := rand.New(rand.NewPCG(1, 2))
			var all []Entry
			for i := range 250 {
				e := entry(uint64(i), float64(1+rng.IntN(3)), t0.Add(-time.Duration(rng.IntN(7200))*time.Second))
				all = append(all, e)
				ix.Upsert(e)
			}
			slices.SortFunc(all, func(a, b Entry) int {
				if entryLess(a, b) {
					return -1
				}
				return 1
			})
			var got []Entry
			for _, want := range []int{100, 100, 50} {
				batch := ix.PopDue(t0, 100)
				require.Len(t, batch, want)
				got = append(got, batch...)
				require.Equal(t, len(all)-len(got), ix.Len())
			}
			require.Equal(t, ids(all), ids(got))
			require.Nil(t, ix.PopDue(t0, 100))
			require.Nil(t, ix.PopDue(t0, 0), "max 0 returns nothing")
		}},
		{"max 0 and negative return nothing and take nothing", func(t *testing.T, ix Index) {
			ix.Upsert(entry(1, 1, t0))
			require.Nil(t, ix.PopDue(t0, 0))
			require.Nil(t, ix.PopDue(t0, -1))
			require.Equal(t, 1, ix.Len())
		}},
		{"upsert of an existing id re-scores", func(t *testing.T, ix Index) {
			a := entry(1, 3, t0.Add(-time.Second))
			b := entry(2, 2, t0.Add(-time.Second))
			ix.Upsert(a)
			ix.Upsert(b)
			a.Priority = 1
			ix.Upsert(a)
			require.Equal(t, 2, ix.Len())
			got := ix.PopDue(t0, 10)
			require.Equal(t, []Entry{a, b}, got, "the new priority wins, the old one is never returned")
			require.Zero(t, ix.Len())
			require.Nil(t, ix.PopDue(t0.Add(time.Hour), 10))
		}},
		{"re-scoring a future entry many times returns it once", func(t *testing.T, ix Index) {
			e := entry(1, 3, t0.Add(90*time.Minute))
			for range 50 {
				e.Priority -= 0.04
				ix.Upsert(e)
			}
			require.Equal(t, 1, ix.Len())
			require.Nil(t, ix.PopDue(t0.Add(89*time.Minute), 10))
			require.Equal(t, []Entry{e}, ix.PopDue(t0.Add(90*time.Minute), 10))
			require.Nil(t, ix.PopDue(t0.Add(9*time.Hour), 10))
		}},
		{"upsert of an existing id reschedules", func(t *testing.T, ix Index) {
			a := entry(1, 1, t0.Add(-time.Minute))
			b := entry(2, 2, t0.Add(3*24*time.Hour))
			ix.Upsert(a)
			ix.Upsert(b)
			a.RunAt = t0.Add(30 * time.Minute) // later: no longer due
			ix.Upsert(a)
			b.RunAt = t0.Add(-time.Second) // earlier: due now
			ix.Upsert(b)
			require.Equal(t, 2, ix.Len())
			requireNextDue(t, ix, a, b)
			require.Equal(t, []Entry{b}, ix.PopDue(t0, 10))
			require.Nil(t, ix.PopDue(t0.Add(30*time.Minute-time.Nanosecond), 10))
			require.Equal(t, []Entry{a}, ix.PopDue(t0.Add(30*time.Minute), 10))
			require.Nil(t, ix.PopDue(t0.Add(4*24*time.Hour), 10), "the old schedules are gone")
			require.Zero(t, ix.Len())
		}},
		{"remove cancels", func(t *testing.T, ix Index) {
			a := entry(1, 1, t0.Add(-time.Minute))
			b := entry(2, 1, t0.Add(time.Minute))
			c := entry(3, 1, t0.Add(5*time.Hour))
			for _, e := range []Entry{a, b, c} {
				ix.Upsert(e)
			}
			require.True(t, ix.Remove(a.ID))
			require.False(t, ix.Remove(a.ID), "already removed")
			require.False(t, ix.Remove(id(99)), "never there")
			require.True(t, ix.Remove(c.ID))
			require.Equal(t, 1, ix.Len())
			require.Nil(t, ix.PopDue(t0, 10))
			require.Equal(t, []Entry{b}, ix.PopDue(t0.Add(10*time.Hour), 10))
			require.False(t, ix.Remove(b.ID), "popped entries are gone")
			require.Zero(t, ix.Len())
			ix.Upsert(a)
			require.Equal(t, []Entry{a}, ix.PopDue(t0.Add(10*time.Hour), 10), "a removed id can come back")
		}},
		{"far-future entries come back when due", func(t *testing.T, ix Index) {
			var es []Entry
			for i, d := range []time.Duration{
				59*time.Minute + 59*time.Second,
				time.Hour,
				time.Hour + time.Second,
				2*time.Hour + 500*time.Millisecond,
				3 * 24 * time.Hour,
				30 * 24 * time.Hour,
				400 * 24 * time.Hour,
			} {
				e := entry(uint64(i), 1, t0.Add(d))
				es = append(es, e)
				ix.Upsert(e)
			}
			// Walk forward a few minutes at a time for three hours, then
			// jump.
			var got []Entry
			for now := t0; now.Before(t0.Add(3 * time.Hour)); now = now.Add(7 * time.Minute) {
				for _, e := range ix.PopDue(now, 10) {
					require.False(t, e.RunAt.After(now), "%v returned at %v", e.RunAt, now)
					got = append(got, e)
				}
			}
			require.Equal(t, es[:4], got)
			require.Nil(t, ix.PopDue(t0.Add(3*24*time.Hour-time.Nanosecond), 10))
			require.Equal(t, es[4:5], ix.PopDue(t0.Add(3*24*time.Hour), 10))
			requireNextDue(t, ix, es[5:]...)
			require.Equal(t, es[5:], ix.PopDue(t0.Add(500*24*time.Hour), 10))
		}},
		{"entries in the past are due at once", func(t *testing.T, ix Index) {
			old := []Entry{
				entry(1, 2, time.Time{}),
				entry(2, 1, t0.Add(-3*24*time.Hour)),
				entry(3, 3, t0.Add(-time.Nanosecond)),
			}
			for _, e := range old {
				ix.Upsert(e)
			}
			require.Equal(t, []Entry{old[1], old[0], old[2]}, ix.PopDue(t0, 10))
			// After the clock has moved on, something due before it.
			later := t0.Add(5 * time.Hour)
			require.Nil(t, ix.PopDue(later, 10))
			e := entry(4, 2, t0.Add(time.Hour))
			ix.Upsert(e)
			requireNextDue(t, ix, e)
			require.Equal(t, []Entry{e}, ix.PopDue(later, 10))
		}},
		{"the clock never goes back", func(t *testing.T, ix Index) {
			require.Nil(t, ix.PopDue(t0.Add(10*time.Second), 10))
			e := entry(1, 1, t0.Add(5*time.Second))
			ix.Upsert(e)
			require.Equal(t, []Entry{e}, ix.PopDue(t0, 10), "due at the latest time the index has seen")
		}},
		{"Len is exact", func(t *testing.T, ix Index) {
			require.Zero(t, ix.Len())
			for i := range 20 {
				ix.Upsert(entry(uint64(i), 2, t0.Add(time.Duration(i)*10*time.Minute)))
			}
			require.Equal(t, 20, ix.Len())
			for i := range 20 {
				ix.Upsert(entry(uint64(i), 1, t0.Add(time.Duration(i)*10*time.Minute)))
			}
			require.Equal(t, 20, ix.Len(), "re-scores are not new entries")
			require.True(t, ix.Remove(id(3)))
			require.Equal(t, 19, ix.Len())
			require.Len(t, ix.PopDue(t0.Add(30*time.Minute), 100), 3)
			require.Equal(t, 16, ix.Len())
			require.Len(t, ix.PopDue(t0.Add(24*time.Hour), 100), 16)
			require.Zero(t, ix.Len())
		}},
		{"NextDue is never later than the earliest", func(t *testing.T, ix Index) {
			requireNextDue(t, ix)
			a := entry(1, 1, t0.Add(3*time.Hour+250*time.Millisecond))
			ix.Upsert(a)
			requireNextDue(t, ix, a)
			b := entry(2, 3, t0.Add(20*time.Minute+time.Nanosecond))
			ix.Upsert(b)
			requireNextDue(t, ix, a, b)
			c := entry(3, 2, t0.Add(-time.Hour))
			ix.Upsert(c)
			requireNextDue(t, ix, a, b, c)
			require.Equal(t, []Entry{c}, ix.PopDue(t0, 10))
			requireNextDue(t, ix, a, b)
			require.True(t, ix.Remove(b.ID))
			requireNextDue(t, ix, a)
			next, _ := ix.NextDue()
			require.Equal(t, []Entry{a}, ix.PopDue(next.Add(time.Hour*3), 10))
			requireNextDue(t, ix)
		}},
		{"a clock jump of days over a full wheel", func(t *testing.T, ix Index) {
			var want []Entry
			for i := range 5000 {
				e := entry(uint64(i), float64(1+i%3), t0.Add(time.Duration(i)*1700*time.Millisecond))
				want = append(want, e)
				ix.Upsert(e)
			}
			slices.SortFunc(want, func(a, b Entry) int {
				if entryLess(a, b) {
					return -1
				}
				return 1
			})
			var got []Entry
			for now := t0.Add(10 * 24 * time.Hour); ix.Len() > 0; now = now.Add(24 * time.Hour) {
				got = append(got, ix.PopDue(now, 1000)...)
			}
			require.Equal(t, ids(want), ids(got))
		}},
		{"lazy deletion keeps memory bounded", func(t *testing.T, ix Index) {
			counter, ok := ix.(interface{ nodeCount() int })
			require.True(t, ok)
			rng := rand.New(rand.NewPCG(3, 4))
			var es []Entry
			for i := range 1000 {
				e := entry(uint64(i), 3, t0.Add(time.Duration(rng.IntN(3*3600))*time.Second))
				es = append(es, e)
				ix.Upsert(e)
			}
			for i := range 100_000 {
				k := rng.IntN(len(es))
				es[k].Priority = 1 + 2*rng.Float64()
				ix.Upsert(es[k])
				if i%1000 == 0 {
					ix.PopDue(t0.Add(time.Duration(i/1000)*time.Minute), 5)
				}
				require.LessOrEqual(t, counter.nodeCount(), 2*ix.Len()+compactMin+1)
			}
			for _, e := range es {
				ix.Remove(e.ID)
				require.LessOrEqual(t, counter.nodeCount(), 2*ix.Len()+compactMin+1)
			}
			require.Zero(t, ix.Len())
		}},
	}
	for _, strategy := range Strategies() {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, mustIndex(t, strategy, t0))
				})
			}
		})
	}
}

// model is the reference: a map, scanned and sorted.
type model struct {
	m     map[uuid.UUID]Entry
	clock time.Time
}

func (m *model) popDue(now time.Time, max int) []Entry {
	if max <= 0 {
		return nil
	}
	if now.After(m.clock) {
		m.clock = now
	}
	var due []Entry
	for _, e := range m.m {
		if !e.RunAt.After(m.clock) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b Entry) int {
		if entryLess(a, b) {
			return -1
		}
		return 1
	})
	due = due[:min(max, len(due))]
	for _, e := range due {
		delete(m.m, e.ID)
	}
	if len(due) == 0 {
		return nil
	}
	return due
}

func (m *model) earliest() (time.Time, bool) {
	var best time.Time
	found := false
	for _, e := range m.m {
		if !found || e.RunAt.Before(best) {
			best, found = e.RunAt, true
		}
	}
	return best, found
}

// TestIndexMatchesModel runs a long random sequence of operations, with a
// clock that advances by nanoseconds, seconds, hours and days, against each
// strategy and the reference, and requires the same answers throughout.
func TestIndexMatchesModel(t *testing.T) {
	t.Parallel()
	const ops = 20_000
	for _, strategy := range Strategies() {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed=%d", strategy, seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(seed, 42))
				now := t0
				ix := mustIndex(t, strategy, now)
				ref := &model{m: map[uuid.UUID]Entry{}, clock: now}
				var known []Entry // every entry ever upserted, current or not
				prios := []float64{1, 1.5, 2, 2.5, 3, 2.9, 1.1}
				createds := []time.Time{t0.Add(-time.Hour), t0.Add(-time.Minute), t0}
				runAt := func() time.Time {
					switch x := rng.IntN(100); {
					case x < 10:
						return now.Add(-time.Duration(rng.Int64N(int64(3 * time.Hour))))
					case x < 35:
						return now.Add(time.Duration(rng.Int64N(int64(5 * time.Second))))
					case x < 60:
						return now.Add(time.Duration(rng.Int64N(int64(time.Hour))))
					case x < 75:
						return now.Add(time.Hour + time.Duration(rng.Int64N(int64(3*time.Hour))))
					case x < 80:
						return now.Add(time.Duration(1+rng.IntN(10)) * 24 * time.Hour)
					case x < 90:
						return now.Add(time.Duration(rng.IntN(7200)) * time.Second).Truncate(time.Second)
					default:
						if len(known) > 0 {
							return known[rng.IntN(len(known))].RunAt // ties
						}
						return now
					}
				}
				for i := range ops {
					switch x := rng.IntN(100); {
					case x < 3:
						now = now.Add(time.Duration(rng.Int64N(int64(10 * time.Hour))))
					case x < 4:
						now = now.Add(time.Duration(1+rng.IntN(3)) * 24 * time.Hour)
					case x < 30:
						now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
					}
					switch x := rng.IntN(100); {
					case x < 35 || len(known) == 0: // new entry
						var u uuid.UUID
						binary.BigEndian.PutUint64(u[:8], rng.Uint64()%4) // shared prefixes
						binary.BigEndian.PutUint64(u[8:], rng.Uint64())
						e := Entry{ID: u, Priority: prios[rng.IntN(len(prios))], RunAt: runAt(), CreatedAt: createds[rng.IntN(len(createds))]}
						known = append(known, e)
						ix.Upsert(e)
						ref.m[e.ID] = e
					case x < 50: // re-score (whether or not still present)
						e := known[rng.IntN(len(known))]
						e.Priority = max(1, e.Priority-0.1*float64(1+rng.IntN(5)))
						known = append(known, e)
						ix.Upsert(e)
						ref.m[e.ID] = e
					case x < 60: // reschedule
						e := known[rng.IntN(len(known))]
						e.RunAt = runAt()
						known = append(known, e)
						ix.Upsert(e)
						ref.m[e.ID] = e
					case x < 70: // cancel
						e := known[rng.IntN(len(known))]
						_, present := ref.m[e.ID]
						delete(ref.m, e.ID)
						require.Equal(t, present, ix.Remove(e.ID), "op %d: Remove", i)
					default:
						limit := 1 + rng.IntN(40)
						if rng.IntN(10) == 0 {
							limit = 1000
						}
						want := ref.popDue(now, limit)
						got := ix.PopDue(now, limit)
						require.Equal(t, want, got, "op %d: PopDue(%v, %d)", i, now, limit)
					}
					require.Equal(t, len(ref.m), ix.Len(), "op %d: Len", i)
					if i%7 == 0 {
						next, ok := ix.NextDue()
						earliest, found := ref.earliest()
						require.Equal(t, found, ok, "op %d: NextDue answers", i)
						if found {
							require.False(t, next.After(earliest), "op %d: NextDue %v later than %v", i, next, earliest)
						}
					}
				}
				// Drain: everything left comes back, in order.
				far := now.Add(365 * 24 * time.Hour)
				for len(ref.m) > 0 {
					require.Equal(t, ref.popDue(far, 500), ix.PopDue(far, 500))
				}
				require.Zero(t, ix.Len())
			})
		}
	}
}
