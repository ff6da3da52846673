package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

// TestClaimLimitedPlanPinned: claimLimitedSQL runs with a plan made once
// per connection. Made while the jobs table is empty, or while it holds a
// backlog of queued jobs (a drain), with the settings
// db.ClaimLimitedLockSQL gives it, that plan must still reach jobs through
// the claim indexes and the primary key once the table holds a backlog
// and a history: never a sequential or bitmap scan of jobs, nor an index
// read from end to end with a filter, nor a listing index, which holds
// the finished jobs too (made over a backlog, the skip scan for the
// queues with work once probed jobs_queue_idx and stepped over every job
// finished so far).
func TestClaimLimitedPlanPinned(t *testing.T) {
	t.Parallel()
	t.Run("made on an empty table", func(t *testing.T) {
		t.Parallel()
		testClaimLimitedPlanPinned(t, false)
	})
	t.Run("made over a backlog", func(t *testing.T) {
		t.Parallel()
		testClaimLimitedPlanPinned(t, true)
	})
}

// planTx opens a transaction on a fresh database for a plan test; it is
// rolled back when the test ends.
func planTx(t *testing.T) (context.Context, pgx.Tx) {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	conn, err := store.Pool().Acquire(ctx)
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = tx.Rollback(ctx)
		conn.Release()
	})
	return ctx, tx
}

// walkPlan runs EXPLAIN (FORMAT JSON) of stmt in tx and calls visit for
// every node of the plan.
func walkPlan(t *testing.T, ctx context.Context, tx pgx.Tx, stmt string, visit func(node map[string]any)) {
	t.Helper()
	var plan []map[string]any
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+stmt).Scan(&plan))
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		visit(n)
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
}

func testClaimLimitedPlanPinned(t *testing.T, backlog bool) {
	ctx, tx := planTx(t)
	_, err := tx.Exec(ctx, `INSERT INTO queues (name, concurrency, per_key_concurrency, rate_limit, rate_period_seconds)
		VALUES ('limited', 100000, NULL, 1000, 1), ('fair', 100000, 5, NULL, NULL)`)
	require.NoError(t, err)
	if backlog {
		_, err = tx.Exec(ctx, `
			INSERT INTO jobs (id, type, queue, effective_priority, status, run_at)
			SELECT gen_random_uuid(), 'noop', (ARRAY['limited', 'fair', 'plain'])[1 + g % 3], 1 + g % 3, 'queued', now()
			FROM generate_series(1, 20000) g`)
		require.NoError(t, err)
	}
	_, err = tx.Exec(ctx, `ANALYZE jobs`) // empty, or a backlog and nothing else
	require.NoError(t, err)
	var locked int
	require.NoError(t, tx.QueryRow(ctx, db.ClaimLimitedLockSQL, []string{"fair", "limited"}).Scan(
		new(string), new(string), new(string), new(string), new(string), new(string), new(string), new(string), &locked))
	_, err = tx.Exec(ctx, `PREPARE pinned(text, int, float8, bigint, text[], text[], text[], boolean) AS `+db.ClaimLimitedSQL)
	require.NoError(t, err)
	var version int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT version FROM flow_control_version`).Scan(&version))
	explain := func() []string {
		var nodes []string
		walkPlan(t, ctx, tx, fmt.Sprintf(`EXECUTE pinned('w', 100, 60000, %d, NULL, ARRAY['fair', 'limited'], ARRAY['noop', 'sleep'], false)`, version),
			func(n map[string]any) {
				if rel, _ := n["Relation Name"].(string); rel == "jobs" {
					idx, _ := n["Index Name"].(string)
					nodes = append(nodes, n["Node Type"].(string)+" "+idx)
				}
			})
		return nodes
	}
	explain() // the generic plan is made now

	_, err = tx.Exec(ctx, `
		INSERT INTO jobs (id, type, queue, effective_priority, status, run_at, finished_at, concurrency_key)
		SELECT gen_random_uuid(), 'noop', (ARRAY['limited', 'fair', 'plain'])[1 + g % 3], 1 + g % 3,
		       CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'queued' END, now(),
		       CASE WHEN g % 2 = 0 THEN now() END, CASE WHEN g % 7 = 0 THEN 'k' || g % 11 END
		FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	nodes := explain()
	want := map[string]bool{
		"ModifyTable ":         true, // the UPDATE itself
		"Index Scan jobs_pkey": true, "Index Scan jobs_claim_queue_idx": true, "Index Only Scan jobs_claim_queue_idx": true,
		"Index Only Scan jobs_claim_key_idx": true, "Index Scan jobs_claim_key_idx": true, "Index Scan jobs_lease_idx": true,
		// The parents' results of a claimed job with parents (a CASE
		// subquery that jobs without parents never run): dependencies by
		// key, a batch callback's members by batch.
		"Index Scan jobs_batch_idx": true,
	}
	for _, n := range nodes {
		require.True(t, want[n], "jobs read by %q in %v", n, nodes)
	}
	require.Contains(t, nodes, "Index Scan jobs_claim_queue_idx", "the claim reads each queue's range of its index")
	require.Contains(t, nodes, "Index Scan jobs_pkey", "the lease reaches the rows by key")
}

// TestClaimPlanPinned: the plain claims (claimSQL for every queue,
// claimQueuesSQL for some) run with a plan made once per connection
// (db.PinPlanSQL before them). Made while the jobs table is empty, or
// while it holds a backlog nothing has analyzed yet, that plan must still
// take the next jobs from the front of the claim index and reach the rows
// by key once the table holds a backlog and a history: never a sequential
// or bitmap scan of jobs, nor the primary key read from end to end.
func TestClaimPlanPinned(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		backlog bool
		sql     string
		args    string
		index   string
	}{
		{"every queue, made on an empty table", false, db.ClaimSQL, "'w', 100, 60000, %d, NULL", "jobs_claim_idx"},
		{"every queue, made over a backlog", true, db.ClaimSQL, "'w', 100, 60000, %d, ARRAY['noop']", "jobs_claim_idx"},
		{"some queues, made on an empty table", false, db.ClaimQueuesSQL, "'w', 100, 60000, ARRAY['a', 'b'], %d, NULL", "jobs_claim_queue_idx"},
		{"some queues, made over a backlog", true, db.ClaimQueuesSQL, "'w', 100, 60000, ARRAY['a', 'b'], %d, ARRAY['noop']", "jobs_claim_queue_idx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testClaimPlanPinned(t, c.backlog, c.sql, c.args, c.index)
		})
	}
}

func testClaimPlanPinned(t *testing.T, backlog bool, sql, args, index string) {
	ctx, tx := planTx(t)
	_, err := tx.Exec(ctx, `ANALYZE jobs`)
	require.NoError(t, err)
	fill := func(n int, finished bool) {
		_, err := tx.Exec(ctx, `
			INSERT INTO jobs (id, type, queue, effective_priority, status, run_at, finished_at)
			SELECT gen_random_uuid(), 'noop', (ARRAY['a', 'b', 'c'])[1 + g % 3], 1 + g % 3,
			       CASE WHEN $2 AND g % 2 = 0 THEN 'completed' ELSE 'queued' END, now(),
			       CASE WHEN $2 AND g % 2 = 0 THEN now() END
			FROM generate_series(1, $1::int) g`, n, finished)
		require.NoError(t, err)
	}
	if backlog {
		fill(20_000, false)
	}
	_, err = tx.Exec(ctx, db.PinPlanSQL)
	require.NoError(t, err)
	var version int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT version FROM flow_control_version`).Scan(&version))
	params := "text, int, float8, bigint, text[]"
	if sql == db.ClaimQueuesSQL {
		params = "text, int, float8, text[], bigint, text[]"
	}
	_, err = tx.Exec(ctx, `PREPARE pinned(`+params+`) AS `+sql)
	require.NoError(t, err)
	explain := func() (nodes []string) {
		walkPlan(t, ctx, tx, `EXECUTE pinned(`+fmt.Sprintf(args, version)+`)`, func(n map[string]any) {
			if rel, _ := n["Relation Name"].(string); rel == "jobs" {
				idx, _ := n["Index Name"].(string)
				nodes = append(nodes, n["Node Type"].(string)+" "+idx)
				if idx == "jobs_pkey" {
					require.NotEmpty(t, n["Index Cond"], "jobs' primary key read from end to end, not by key: %v", n)
				}
			}
		})
		return nodes
	}
	explain() // the generic plan is made now
	fill(40_000, true)
	nodes := explain()
	want := map[string]bool{
		"ModifyTable ": true, "Index Scan jobs_pkey": true, "Index Scan " + index: true,
	}
	for _, n := range nodes {
		require.True(t, want[n], "jobs read by %q in %v", n, nodes)
	}
	require.Contains(t, nodes, "Index Scan "+index, "the claim takes the next jobs from the claim index")
	require.Contains(t, nodes, "Index Scan jobs_pkey", "the lease reaches the rows by key")
}
