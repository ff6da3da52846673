package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
)

// TestSignalPlanPinned: the signals' statement runs with a plan made once
// per connection (db.PinPlanSQL before it). Made while the jobs table is
// empty, or holds rows the statistics do not know of yet, that plan must
// reach jobs only through the primary key once the table holds a hundred
// thousand jobs more: never a sequential or bitmap scan, nor the key read
// from end to end, nor a sort of its rows.
func TestSignalPlanPinned(t *testing.T) {
	t.Parallel()
	t.Run("made on an empty table", func(t *testing.T) {
		t.Parallel()
		testSignalPlanPinned(t, 0)
	})
	t.Run("made over rows not yet analyzed", func(t *testing.T) {
		t.Parallel()
		testSignalPlanPinned(t, 20_000)
	})
}

// fillJobs adds n jobs, half finished, half waiting for the signal "a".
func fillJobs(t *testing.T, ctx context.Context, tx pgx.Tx, n int) {
	t.Helper()
	_, err := tx.Exec(ctx, `
		INSERT INTO jobs (id, type, queue, effective_priority, status, run_at, finished_at, wait_kind, wait_name)
		SELECT gen_random_uuid(), 'noop', 'q', 2, CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'waiting' END, now(),
		       CASE WHEN g % 2 = 0 THEN now() END, CASE WHEN g % 2 = 1 THEN 'signal' END, CASE WHEN g % 2 = 1 THEN 'a' END
		FROM generate_series(1, $1::int) g`, n)
	require.NoError(t, err)
}

func testSignalPlanPinned(t *testing.T, before int) {
	ctx, tx := planTx(t)
	_, err := tx.Exec(ctx, `ANALYZE jobs`)
	require.NoError(t, err)
	fillJobs(t, ctx, tx, before)
	_, err = tx.Exec(ctx, db.PinPlanSQL)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `PREPARE sig(uuid[], text[], text[], text[]) AS `+db.SignalBatchSQL)
	require.NoError(t, err)
	explain := func() (nodes []string) {
		walkPlan(t, ctx, tx, `EXECUTE sig(ARRAY[gen_random_uuid(), gen_random_uuid()], ARRAY['a', 'b'], ARRAY['1', '2'], ARRAY['1', '2'])`,
			func(n map[string]any) {
				if rel, _ := n["Relation Name"].(string); rel == "jobs" {
					idx, _ := n["Index Name"].(string)
					nodes = append(nodes, n["Node Type"].(string)+" "+idx)
					if n["Node Type"] == "Index Scan" {
						require.NotEmpty(t, n["Index Cond"], "jobs' primary key read from end to end, not by key: %v", n)
					}
				}
				if n["Node Type"] == "Sort" {
					kids, _ := n["Plans"].([]any)
					for _, k := range kids { // what it sorts, not the CTEs it starts
						kid := k.(map[string]any)
						rel, _ := kid["Relation Name"].(string)
						require.False(t, rel == "jobs" && kid["Parent Relationship"] == "Outer",
							"a sort of jobs' rows: the primary key gives the lock order")
					}
				}
			})
		return nodes
	}
	explain() // the generic plan is made now
	fillJobs(t, ctx, tx, 100_000)
	nodes := explain()
	for _, n := range nodes {
		require.Contains(t, []string{"ModifyTable ", "Index Scan jobs_pkey"}, n, "jobs read by %q in %v", n, nodes)
	}
	require.Contains(t, nodes, "Index Scan jobs_pkey", fmt.Sprint(nodes))
}
