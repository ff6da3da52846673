package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// jobsHealth reads the jobs table's statistics.
func jobsHealth(t *testing.T, ctx context.Context, store *db.Store) domain.TableHealth {
	t.Helper()
	tables, err := store.TableHealth(ctx)
	require.NoError(t, err)
	for _, h := range tables {
		if h.Table == "jobs" {
			return h
		}
	}
	t.Fatal("no statistics for jobs")
	return domain.TableHealth{}
}

// TestVacuumerVacuumsWhenDeadTuplesPassTheThreshold: with autovacuum off
// for the table, dead versions pile up; the vacuumer leaves them below its
// threshold, vacuums (and analyzes) jobs once they pass it, and then
// leaves the table alone for its quiet time.
func TestVacuumerVacuumsWhenDeadTuplesPassTheThreshold(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := store.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `ALTER TABLE jobs SET (autovacuum_enabled = false)`)
	require.NoError(t, err)

	params := make([]jobs.EnqueueParams, 3000)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "v"}
	}
	_, err = store.Enqueue(ctx, params...)
	require.NoError(t, err)
	// makeDead rewrites n rows, leaving n dead versions, and has this
	// backend report its statistics at once.
	makeDead := func(n int) {
		_, err := conn.Exec(ctx, `UPDATE jobs SET updated_at = now() WHERE id IN (SELECT id FROM jobs LIMIT $1)`, n)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `SELECT 1`)
		require.NoError(t, err)
	}
	waitDead := func(atLeast int64) domain.TableHealth {
		var h domain.TableHealth
		require.Eventually(t, func() bool {
			h = jobsHealth(t, ctx, store)
			return h.DeadTuples >= atLeast
		}, 30*time.Second, 20*time.Millisecond, "statistics report the dead versions")
		return h
	}

	v := NewVacuumer(VacuumConfig{Holder: "test", Interval: time.Millisecond, DeadTuples: 2000, DeadFraction: 0.1, Quiet: time.Hour}, store, nil, quiet())
	makeDead(1500)
	waitDead(1500)
	did, err := v.runOnce(ctx)
	require.NoError(t, err)
	require.False(t, did, "1,500 dead versions are below 2,000 + 10% of 3,000")
	require.Nil(t, jobsHealth(t, ctx, store).LastVacuum)

	makeDead(1500)
	before := waitDead(2300)
	require.Nil(t, before.LastVacuum)
	did, err = v.runOnce(ctx)
	require.NoError(t, err)
	require.True(t, did, "past the threshold")
	var after domain.TableHealth
	require.Eventually(t, func() bool {
		after = jobsHealth(t, ctx, store)
		return after.LastVacuum != nil && after.LastAnalyze != nil
	}, 30*time.Second, 20*time.Millisecond, "VACUUM (ANALYZE) ran")
	require.Less(t, after.DeadTuples, before.DeadTuples, "dead versions removed")

	makeDead(3000)
	waitDead(3000)
	did, err = v.runOnce(ctx)
	require.NoError(t, err)
	require.False(t, did, "a VACUUM ran within the quiet time")
}
