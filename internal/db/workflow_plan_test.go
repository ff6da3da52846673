package db_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
)

// TestReleaseAfterFinishReadsNoTable: every finish that completes jobs
// looks for their dependents. With the statistics of a drain's start
// (everything queued, job_dependencies never analyzed) and thousands of
// jobs completed since, neither statement may read jobs from end to end:
// each goes from the finished ids to their edges and touches jobs by
// primary key only. Checked for the plan PostgreSQL makes for the given
// ids and for the generic plan a cached statement ends up with.
func TestReleaseAfterFinishReadsNoTable(t *testing.T) {
	t.Parallel()
	ctx, tx := planTx(t)
	_, err := tx.Exec(ctx, `
		INSERT INTO jobs (id, type, queue, effective_priority, status, run_at)
		SELECT gen_random_uuid(), 'noop', 'default', 2, 'queued', now() FROM generate_series(1, 20000)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `ANALYZE jobs`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE jobs SET status = 'completed', finished_at = now()
		WHERE id IN (SELECT id FROM jobs ORDER BY id LIMIT 15000)`)
	require.NoError(t, err)
	var finished []string
	require.NoError(t, tx.QueryRow(ctx, `SELECT array_agg(id::text) FROM (SELECT id FROM jobs WHERE status = 'completed' LIMIT 300) s`).Scan(&finished))

	for _, mode := range []string{"auto", "force_generic_plan"} {
		_, err = tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode)
		require.NoError(t, err)
		for name, sql := range map[string]string{"lock": db.LockChildrenSQL, "release": db.ReleaseChildrenSQL} {
			_, err = tx.Exec(ctx, `PREPARE children(uuid[]) AS `+sql)
			require.NoError(t, err)
			// EXPLAIN takes no parameters; the ids are uuids PostgreSQL printed.
			walkPlan(t, ctx, tx, `EXECUTE children('{`+strings.Join(finished, ",")+`}')`, func(n map[string]any) {
				if rel, _ := n["Relation Name"].(string); rel == "jobs" {
					require.NotEqual(t, "Seq Scan", n["Node Type"], "%s (%s): jobs read from end to end", name, mode)
				}
				if idx, _ := n["Index Name"].(string); strings.HasPrefix(idx, "jobs_") {
					require.Equal(t, "jobs_pkey", idx, "%s (%s): jobs read through %s", name, mode, idx)
				}
			})
			_, err = tx.Exec(ctx, `DEALLOCATE children`)
			require.NoError(t, err)
		}
	}
}
