package db_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// logLines makes n info lines of a job's attempt, numbered from first.
func logLines(id uuid.UUID, attempt, first, n int) []domain.LogEntry {
	out := make([]domain.LogEntry, n)
	at := time.Now()
	for i := range out {
		out[i] = domain.LogEntry{JobID: id, Attempt: attempt, At: at.Add(time.Duration(first+i) * time.Microsecond),
			Level: "info", Message: fmt.Sprintf("attempt %d line %d", attempt, first+i)}
	}
	return out
}

// storedLines counts a job's rows in job_logs.
func (b *testBundle) storedLines(t *testing.T, id uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM job_logs WHERE job_id = $1`, id).Scan(&n))
	return n
}

// A job's log is capped in all, not only per attempt: with attempts of
// 1,000 lines each (the per-attempt cap), the sixth would take the job past
// 5,000. Past the cap one last line counts what was dropped, and keeps
// counting; other jobs in the same batches are not held back.
func TestJobLogCappedPerJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	chatty := b.enqueue(t, jobs.EnqueueParams{})
	quiet := b.enqueue(t, jobs.EnqueueParams{})
	for attempt := 1; attempt <= 6; attempt++ {
		for first := 0; first < domain.MaxJobLogLines; first += 500 {
			batch := logLines(chatty.ID, attempt, first, 500)
			batch = append(batch, logLines(quiet.ID, attempt, first, 1)...)
			require.NoError(t, b.store.InsertJobLogs(b.ctx, batch))
		}
	}
	require.Equal(t, domain.MaxJobLogTotal+1, b.storedLines(t, chatty.ID), "the cap and the line that says so")
	require.Equal(t, 12, b.storedLines(t, quiet.ID))

	all, err := b.store.JobLogs(b.ctx, chatty.ID, 0, domain.MaxJobLogTotal+10)
	require.NoError(t, err)
	require.Len(t, all, domain.MaxJobLogTotal+1)
	require.Equal(t, "attempt 5 line 999", all[domain.MaxJobLogTotal-1].Message)
	marker := all[domain.MaxJobLogTotal]
	require.Equal(t, "warn", marker.Level)
	require.Equal(t, 6, marker.Attempt)
	require.Equal(t, "this job logged more than 5000 lines in all; 1000 later lines were not kept", marker.Message)
	require.EqualValues(t, 1000, marker.Attrs["dropped"])

	// Later lines raise the count on the same line.
	require.NoError(t, b.store.InsertJobLogs(b.ctx, logLines(chatty.ID, 7, 0, 250)))
	require.Equal(t, domain.MaxJobLogTotal+1, b.storedLines(t, chatty.ID))
	last, err := b.store.JobLogs(b.ctx, chatty.ID, all[domain.MaxJobLogTotal-1].Seq, 10)
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, marker.Seq, last[0].Seq)
	require.Equal(t, "this job logged more than 5000 lines in all; 1250 later lines were not kept", last[0].Message)
	require.EqualValues(t, 1250, last[0].Attrs["dropped"])

	// A batch that crosses the cap keeps what fits, then the marker.
	edge := b.enqueue(t, jobs.EnqueueParams{})
	for first := 0; first < domain.MaxJobLogTotal-100; first += 700 {
		require.NoError(t, b.store.InsertJobLogs(b.ctx, logLines(edge.ID, 1, first, min(700, domain.MaxJobLogTotal-100-first))))
	}
	require.NoError(t, b.store.InsertJobLogs(b.ctx, logLines(edge.ID, 2, 0, 300)))
	lines, err := b.store.JobLogs(b.ctx, edge.ID, 0, domain.MaxJobLogTotal+10)
	require.NoError(t, err)
	require.Len(t, lines, domain.MaxJobLogTotal+1)
	require.Equal(t, "attempt 2 line 99", lines[domain.MaxJobLogTotal-1].Message)
	require.Equal(t, "this job logged more than 5000 lines in all; 200 later lines were not kept", lines[domain.MaxJobLogTotal].Message)
	require.Equal(t, 2, lines[domain.MaxJobLogTotal].Attempt)
}

// A job's log lines go with the job: purged from the bin, or pruned by
// retention. Lines that arrive for a job already gone are dropped without
// failing the rest of their batch.
func TestJobLogsGoWithTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone := b.enqueue(t, jobs.EnqueueParams{})
	kept := b.enqueue(t, jobs.EnqueueParams{})
	require.NoError(t, b.store.InsertJobLogs(b.ctx, append(logLines(gone.ID, 1, 0, 20), logLines(kept.ID, 1, 0, 3)...)))
	require.Equal(t, 20, b.storedLines(t, gone.ID))

	_, err := b.store.DeleteJob(b.ctx, gone.ID)
	require.NoError(t, err)
	require.Equal(t, 20, b.storedLines(t, gone.ID), "the bin keeps them: the job can be restored")
	require.NoError(t, b.store.PurgeJob(b.ctx, gone.ID))
	require.Zero(t, b.storedLines(t, gone.ID))

	require.NoError(t, b.store.InsertJobLogs(b.ctx, append(logLines(gone.ID, 1, 20, 5), logLines(kept.ID, 1, 3, 2)...)))
	require.Zero(t, b.storedLines(t, gone.ID))
	require.Equal(t, 5, b.storedLines(t, kept.ID))

	// Retention: a cancelled job past retention_cancelled_days.
	_, err = b.store.CancelJob(b.ctx, kept.ID)
	require.NoError(t, err)
	later := time.Now().Add(8 * 24 * time.Hour)
	n, err := b.store.Prune(b.ctx, domain.DefaultSettings(), &later, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, b.storedLines(t, kept.ID))
}

// Lines that come with an outcome are stored by the finish statement, in
// order, scrubbed and without NUL bytes, for the jobs whose lease held;
// the lines of a lost lease are not stored there (the worker keeps them
// through the log writer instead).
func TestFinishStoresTheLinesItCarries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{})
	b.enqueue(t, jobs.EnqueueParams{})
	claimed := b.claim(t, "w", 2, time.Minute)
	require.Len(t, claimed, 2)
	held, lost := claimed[0], claimed[1]
	lines := logLines(held.ID, 1, 0, 3)
	lines[1].Message = "connecting to postgres://app:hunter2@db/app\x00"
	lines[2].Attrs = map[string]any{"rows": 42, "note": "a\x00b"}
	stale := domain.Lease{JobID: lost.ID, Token: uuid.New()}

	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{
		{Lease: domain.LeaseOf(held), Outcome: domain.OutcomeSucceeded, Log: lines},
		{Lease: stale, Outcome: domain.OutcomeSucceeded, Log: logLines(lost.ID, 1, 0, 2)},
	})
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, moved[0].Status)
	require.True(t, moved[1].LeaseLost())

	got, err := b.store.JobLogs(b.ctx, held.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, "attempt 1 line 0", got[0].Message)
	require.NotContains(t, got[1].Message, "hunter2")
	require.NotContains(t, got[1].Message, "\x00")
	require.EqualValues(t, 42, got[2].Attrs["rows"])
	require.Equal(t, "ab", got[2].Attrs["note"])
	require.Less(t, got[0].Seq, got[1].Seq)
	require.Less(t, got[1].Seq, got[2].Seq)
	require.Zero(t, b.storedLines(t, lost.ID), "a lost lease stores nothing")
}
