//go:build soak

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
)

// soakFigures is what a soak comes to.
type soakFigures struct {
	haTally
	Interrupted                     int           // jobs whose run was cut short (a lease reaped) and run again
	PickupP50, PickupP99, PickupMax time.Duration // first start less enqueue, over every acknowledged job
	ByTen                           []string      // p99 pickup per ten minutes of the run
}

func (s soakFigures) String() string {
	return fmt.Sprintf("%s interrupted=%d; pickup p50 %s, p99 %s, max %s; p99 pickup by ten minutes: %s", s.haTally,
		s.Interrupted, s.PickupP50.Round(time.Millisecond), s.PickupP99.Round(time.Millisecond), s.PickupMax.Round(time.Millisecond),
		strings.Join(s.ByTen, ", "))
}

// soakRuns is every job's enqueue time and first start, live or in the
// history.
const soakRuns = `(SELECT j.id, j.created_at, (SELECT min(e.started_at) FROM job_executions e WHERE e.job_id = j.id) AS first
		FROM jobs j
	UNION ALL SELECT h.id, h.created_at, (SELECT min(x.started_at) FROM jsonb_to_recordset(h.execution_rows) AS x(started_at timestamptz))
		FROM job_history h)`

// soakTally writes the acknowledged ids into a table beside Flint's, waits
// until every one has completed (or limit passes) and nothing runs, and
// counts what was lost, doubled and left open, and the pickup latency.
func (r *soakRig) soakTally(t *testing.T, acked []uuid.UUID, begin time.Time, limit time.Duration) soakFigures {
	t.Helper()
	// The tally reads millions of rows: past the statement deadline Flint
	// gives its own statements (db.StatementTimeout).
	ctx := db.WithStatementTimeout(context.Background(), 15*time.Minute)
	pool := r.store.Pool()
	_, err := pool.Exec(ctx, `CREATE TABLE soak_acked (id uuid PRIMARY KEY)`)
	require.NoError(t, err)
	for chunk := range slices.Chunk(acked, 100_000) {
		rows := make([][]any, len(chunk))
		for i, id := range chunk {
			rows[i] = []any{id}
		}
		_, err = pool.CopyFrom(ctx, pgx.Identifier{"soak_acked"}, []string{"id"}, pgx.CopyFromRows(rows))
		require.NoError(t, err)
	}

	fig := soakFigures{haTally: haTally{Acked: len(acked)}}
	deadline := time.Now().Add(limit)
	started := time.Now()
	missing := `SELECT count(*) FROM soak_acked a WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = a.id AND j.status = 'completed')
		AND NOT EXISTS (SELECT 1 FROM job_history h WHERE h.id = a.id AND h.status = 'completed')`
	var lastErr error
	pollUntil(limit, 5*time.Second, func() bool {
		lastErr = pool.QueryRow(ctx, missing).Scan(&fig.Lost)
		return lastErr == nil && fig.Lost == 0
	})
	require.NoError(t, lastErr, "counting the acknowledged jobs not completed")
	t.Logf("soak: every acknowledged job done %s after the tally began (or %d not)", time.Since(started).Round(time.Second), fig.Lost)
	pollUntil(time.Until(deadline), time.Second, func() bool {
		lastErr = pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'running'`).Scan(&fig.Open)
		return lastErr == nil && fig.Open == 0
	})
	require.NoError(t, lastErr, "counting the jobs left running")
	var succeededTwice, inBoth int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM `+everyRunSQL+` r
		WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) > 1) d`).Scan(&succeededTwice))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM jobs JOIN job_history USING (id)`).Scan(&inBoth))
	fig.Doubled = succeededTwice + inBoth
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM `+everyRunSQL+` r
		GROUP BY job_id HAVING count(*) > 1) d`).Scan(&fig.Reruns))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT interruptions FROM jobs
		UNION ALL SELECT interruptions FROM job_history) j WHERE interruptions > 0`).Scan(&fig.Interrupted))
	if fig.Lost > 0 {
		r.logMissing(t, missing)
	}

	var p50, p99, pmax float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.99) WITHIN GROUP (ORDER BY s), max(s)
		FROM (SELECT extract(epoch FROM r.first - r.created_at) s FROM soak_acked a JOIN `+soakRuns+` r USING (id)) p`).Scan(&p50, &p99, &pmax))
	fig.PickupP50, fig.PickupP99, fig.PickupMax = seconds(p50), seconds(p99), seconds(pmax)
	byTen, err := pool.Query(ctx, `SELECT floor(extract(epoch FROM r.created_at - $1) / 600)::int,
		percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM r.first - r.created_at))
		FROM soak_acked a JOIN `+soakRuns+` r USING (id) GROUP BY 1 ORDER BY 1`, begin)
	require.NoError(t, err)
	for byTen.Next() {
		var ten int
		var p float64
		require.NoError(t, byTen.Scan(&ten, &p))
		fig.ByTen = append(fig.ByTen, fmt.Sprintf("%d–%d min %s", ten*10, ten*10+10, seconds(p).Round(time.Millisecond)))
	}
	require.NoError(t, byTen.Err())
	return fig
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// logMissing logs ten of the acknowledged jobs that did not complete.
func (r *soakRig) logMissing(t *testing.T, missing string) {
	rows, err := r.store.Pool().Query(db.WithStatementTimeout(context.Background(), 15*time.Minute), `SELECT a.id, coalesce(j.status, 'missing') FROM soak_acked a
		LEFT JOIN `+everyJobSQL+` j ON j.id = a.id WHERE j.status IS DISTINCT FROM 'completed' LIMIT 10`)
	if err != nil {
		t.Logf("listing the lost jobs: %v (%s)", err, missing)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id uuid.UUID
		var st string
		_ = rows.Scan(&id, &st)
		t.Logf("acknowledged job %s: %s", id, st)
	}
}
