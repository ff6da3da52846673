package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// haTally is what a run under failovers comes to.
type haTally struct {
	Acked   int // enqueues answered 201
	Lost    int // of those, missing from the database, or not completed in time
	Doubled int // jobs with more than one successful execution (or in the live table and the history at once)
	Open    int // jobs still running (an execution nobody closes) once all is done
	Reruns  int // jobs run more than once (an attempt interrupted by the failover): allowed, at-least-once
}

func (h haTally) String() string {
	return fmt.Sprintf("acknowledged=%d lost=%d doubled=%d open=%d rerun=%d", h.Acked, h.Lost, h.Doubled, h.Open, h.Reruns)
}

// Finished jobs move from jobs to job_history after a few minutes
// (history_after_minutes), their executions with them, so the tally reads
// both.
const (
	everyJobSQL = `(SELECT id, status FROM jobs UNION ALL SELECT id, status FROM job_history)`
	everyRunSQL = `(SELECT job_id, outcome FROM job_executions
		UNION ALL SELECT h.id, x.outcome FROM job_history h, jsonb_to_recordset(h.execution_rows) AS x(outcome text))`
)

// settle waits until every acknowledged job has completed (or limit
// passes) and counts what went wrong.
func (c *haCluster) settle(t *testing.T, acked []uuid.UUID, limit time.Duration) haTally {
	t.Helper()
	ctx := context.Background()
	tally := haTally{Acked: len(acked)}
	deadline := time.Now().Add(limit)
	var completed int
	pollUntil(limit, 200*time.Millisecond, func() bool {
		err := c.store.Pool().QueryRow(ctx, `SELECT count(DISTINCT id) FROM `+everyJobSQL+` j
			WHERE id = ANY($1) AND status = 'completed'`, acked).Scan(&completed)
		return err == nil && completed == len(acked)
	})
	tally.Lost = len(acked) - completed
	// Jobs enqueued but not acknowledged (the answer was lost) finish too;
	// then nothing may be left running.
	pollUntil(time.Until(deadline), 200*time.Millisecond, func() bool {
		err := c.store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'running'`).Scan(&tally.Open)
		return err == nil && tally.Open == 0
	})
	var succeededTwice, inBoth int
	require.NoError(t, c.store.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM `+everyRunSQL+` r
		WHERE outcome = 'succeeded' GROUP BY job_id HAVING count(*) > 1) d`).Scan(&succeededTwice))
	require.NoError(t, c.store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs JOIN job_history USING (id)`).Scan(&inBoth))
	tally.Doubled = succeededTwice + inBoth
	require.NoError(t, c.store.Pool().QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM `+everyRunSQL+` r
		GROUP BY job_id HAVING count(*) > 1) d`).Scan(&tally.Reruns))
	if tally.Lost > 0 {
		rows, err := c.store.Pool().Query(ctx, `SELECT a.id, coalesce(j.status, 'missing') FROM unnest($1::uuid[]) a(id)
			LEFT JOIN `+everyJobSQL+` j ON j.id = a.id WHERE j.status IS DISTINCT FROM 'completed' LIMIT 10`, acked)
		if err == nil {
			for rows.Next() {
				var id uuid.UUID
				var st string
				_ = rows.Scan(&id, &st)
				t.Logf("acknowledged job %s: %s", id, st)
			}
			rows.Close()
		}
	}
	return tally
}
