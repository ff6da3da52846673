package db_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestClaimSharesParentsResults: jobs claimed together that share parents
// each get every parent's result (read once for them all), and the bound
// is each job's own: a result that fits one job's total is passed to it
// while the same result, one of six large ones, is marked too large for
// the other.
func TestClaimSharesParentsResults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := func(i int) string { return fmt.Sprintf(`{"i":%d,"blob":"%s"}`, i, strings.Repeat("x", 900_000)) }
	steps := [][]string{{"p0"}, {"p1"}, {"p2"}, {"p3"}, {"p4"}, {"p5"},
		{"one", "p5"}, {"all", "p0", "p1", "p2", "p3", "p4", "p5"}, {"also-one", "p5"}}
	ids := b.workflow(t, steps)
	for range 6 {
		got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"wf"}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, got, 1)
		i := -1 // the parents run in any order; p<i> returns big(i)
		for k, s := range steps[:6] {
			if ids[s[0]] == got[0].ID {
				i = k
			}
		}
		require.GreaterOrEqual(t, i, 0, "a parent is claimed first")
		_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSucceeded, Result: json.RawMessage(big(i))}})
		require.NoError(t, err)
	}
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"wf"}, Limit: 10, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 3, "one, all and also-one in one claim")
	by := map[string]jobs.Parents{}
	for _, j := range got {
		for k, id := range ids {
			if id == j.ID {
				by[k] = j.Parents
			}
		}
	}
	for _, k := range []string{"one", "also-one"} {
		require.Equal(t, []string{"p5"}, by[k].Keys())
		require.JSONEq(t, big(5), string(by[k]["p5"]), "%s gets p5's result", k)
	}
	all := by["all"]
	require.Len(t, all, 6)
	for i := range 4 {
		require.JSONEq(t, big(i), string(all[fmt.Sprintf("p%d", i)]), "equal sizes are passed in key order while they fit")
	}
	for _, k := range []string{"p4", "p5"} {
		_, err := all.Raw(k)
		var tl *jobs.ParentTooLargeError
		require.True(t, errors.As(err, &tl), "%s is beyond all's bound: %v", k, err)
		require.InDelta(t, len(big(5)), tl.Bytes, 4, "the size of the stored JSON text")
	}
}

// TestParentsOfPlan: the statement that reads claimed jobs' parents runs
// with a generic plan made once per connection (db.ParentsPlanSQL before
// it). Made while the tables are empty, that plan must still reach every
// table by key once they hold a backlog and a history nothing has
// analyzed: no table read from end to end.
func TestParentsOfPlan(t *testing.T) {
	t.Parallel()
	ctx, tx := planTx(t)
	_, err := tx.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, db.ParentsPlanSQL)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `PREPARE parents(uuid[]) AS `+db.ParentsOfSQL)
	require.NoError(t, err)
	explain := func(ids string) (nodes []string) {
		walkPlan(t, ctx, tx, `EXECUTE parents('`+ids+`')`, func(n map[string]any) {
			rel, _ := n["Relation Name"].(string)
			if rel == "" {
				return
			}
			typ := n["Node Type"].(string)
			nodes = append(nodes, typ+" "+rel)
			switch typ {
			case "Index Scan", "Index Only Scan":
			case "Bitmap Heap Scan": // over a bitmap index scan by key
				require.NotEmpty(t, n["Recheck Cond"], "%s read by a bitmap without a key: %v", rel, n)
			default:
				t.Fatalf("%s read by %s", rel, typ)
			}
		})
		return nodes
	}
	explain("{}") // the generic plan is made now, on empty tables
	_, err = tx.Exec(ctx, `
		INSERT INTO jobs (id, type, queue, effective_priority, status, run_at, result)
		SELECT gen_random_uuid(), 'noop', 'q', 1, CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'queued' END, now(), '{}'
		FROM generate_series(1, 40000) g`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
		INSERT INTO job_dependencies (job_id, depends_on_id)
		SELECT c.id, p.id FROM (SELECT id, row_number() OVER () AS n FROM jobs WHERE status = 'queued' LIMIT 5000) c
		JOIN (SELECT id, row_number() OVER () AS n FROM jobs WHERE status = 'completed' LIMIT 5000) p USING (n)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO workflow_steps (job_id, step_key) SELECT id, id::text FROM jobs`)
	require.NoError(t, err)
	var some []string
	rows, err := tx.Query(ctx, `SELECT job_id::text FROM job_dependencies LIMIT 100`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		some = append(some, id)
	}
	require.NoError(t, rows.Err())
	nodes := explain("{" + strings.Join(some, ",") + "}")
	require.Contains(t, nodes, "Index Scan jobs", "the parents are read by key")
}
