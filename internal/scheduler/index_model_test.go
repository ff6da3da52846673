package scheduler

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

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

// modelRun is one random run of an index against the model.
type modelRun struct {
	rng   *rand.Rand
	now   time.Time
	ix    Index
	ref   *model
	known []Entry // every entry ever upserted, current or not
}

var (
	modelPriorities = []float64{1, 1.5, 2, 2.5, 3, 2.9, 1.1}
	modelCreatedAts = []time.Time{t0.Add(-time.Hour), t0.Add(-time.Minute), t0}
)

// runAt picks a run_at: in the past, within seconds, within the hour,
// beyond it, days ahead, on a whole second, or one seen before (a tie).
func (r *modelRun) runAt() time.Time {
	switch x := r.rng.IntN(100); {
	case x < 10:
		return r.now.Add(-time.Duration(r.rng.Int64N(int64(3 * time.Hour))))
	case x < 35:
		return r.now.Add(time.Duration(r.rng.Int64N(int64(5 * time.Second))))
	case x < 60:
		return r.now.Add(time.Duration(r.rng.Int64N(int64(time.Hour))))
	case x < 75:
		return r.now.Add(time.Hour + time.Duration(r.rng.Int64N(int64(3*time.Hour))))
	case x < 80:
		return r.now.Add(time.Duration(1+r.rng.IntN(10)) * 24 * time.Hour)
	case x < 90:
		return r.now.Add(time.Duration(r.rng.IntN(7200)) * time.Second).Truncate(time.Second)
	default:
		if len(r.known) > 0 {
			return r.known[r.rng.IntN(len(r.known))].RunAt // ties
		}
		return r.now
	}
}

// advance moves the clock on by nanoseconds, seconds, hours or days, or
// leaves it.
func (r *modelRun) advance() {
	switch x := r.rng.IntN(100); {
	case x < 3:
		r.now = r.now.Add(time.Duration(r.rng.Int64N(int64(10 * time.Hour))))
	case x < 4:
		r.now = r.now.Add(time.Duration(1+r.rng.IntN(3)) * 24 * time.Hour)
	case x < 30:
		r.now = r.now.Add(time.Duration(r.rng.Int64N(int64(3 * time.Second))))
	}
}

// upsert upserts e into the index and the model.
func (r *modelRun) upsert(e Entry) {
	r.known = append(r.known, e)
	r.ix.Upsert(e)
	r.ref.m[e.ID] = e
}

// step makes op i, a random operation, on the index and the model, and
// requires the same answers from both.
func (r *modelRun) step(t *testing.T, i int) {
	switch x := r.rng.IntN(100); {
	case x < 35 || len(r.known) == 0: // new entry
		var u uuid.UUID
		binary.BigEndian.PutUint64(u[:8], r.rng.Uint64()%4) // shared prefixes
		binary.BigEndian.PutUint64(u[8:], r.rng.Uint64())
		r.upsert(Entry{ID: u, Priority: modelPriorities[r.rng.IntN(len(modelPriorities))], RunAt: r.runAt(),
			CreatedAt: modelCreatedAts[r.rng.IntN(len(modelCreatedAts))]})
	case x < 50: // re-score (whether or not still present)
		e := r.known[r.rng.IntN(len(r.known))]
		e.Priority = max(1, e.Priority-0.1*float64(1+r.rng.IntN(5)))
		r.upsert(e)
	case x < 60: // reschedule
		e := r.known[r.rng.IntN(len(r.known))]
		e.RunAt = r.runAt()
		r.upsert(e)
	case x < 70: // cancel
		e := r.known[r.rng.IntN(len(r.known))]
		_, present := r.ref.m[e.ID]
		delete(r.ref.m, e.ID)
		require.Equal(t, present, r.ix.Remove(e.ID), "op %d: Remove", i)
	default:
		limit := 1 + r.rng.IntN(40)
		if r.rng.IntN(10) == 0 {
			limit = 1000
		}
		want := r.ref.popDue(r.now, limit)
		got := r.ix.PopDue(r.now, limit)
		require.Equal(t, want, got, "op %d: PopDue(%v, %d)", i, r.now, limit)
	}
	require.Equal(t, len(r.ref.m), r.ix.Len(), "op %d: Len", i)
	if i%7 == 0 {
		next, ok := r.ix.NextDue()
		earliest, found := r.ref.earliest()
		require.Equal(t, found, ok, "op %d: NextDue answers", i)
		if found {
			require.False(t, next.After(earliest), "op %d: NextDue %v later than %v", i, next, earliest)
		}
	}
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
				r := &modelRun{rng: rand.New(rand.NewPCG(seed, 42)), now: t0, ix: mustIndex(t, strategy, t0),
					ref: &model{m: map[uuid.UUID]Entry{}, clock: t0}}
				for i := range ops {
					r.advance()
					r.step(t, i)
				}
				// Drain: everything left comes back, in order.
				far := r.now.Add(365 * 24 * time.Hour)
				for len(r.ref.m) > 0 {
					require.Equal(t, r.ref.popDue(far, 500), r.ix.PopDue(far, 500))
				}
				require.Zero(t, r.ix.Len())
			})
		}
	}
}
