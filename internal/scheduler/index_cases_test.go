package scheduler

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// indexCases is TestIndex's behavioural suite, each case run against every
// strategy on a new index whose clock is t0.
var indexCases = []struct {
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
