package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestSuspendedBatchAnnouncesTimers: many attempts ending asleep in one
// finish are written together, a stale lease among them changing
// nothing; each sleeper's wake time is announced on the scheduled
// channel, so the promoter's timer index wakes it on time rather than
// its slow sweep.
func TestSuspendedBatchAnnouncesTimers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := pgx.Connect(b.ctx, b.url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(b.ctx, `LISTEN `+db.ChannelScheduled)
	require.NoError(t, err)

	const n = 20
	b.enqueueN(t, n, jobs.EnqueueParams{Queue: "naps"})
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"naps"}, Limit: n, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	wake := time.Now().Add(time.Hour)
	var batch []domain.Finish
	for i, j := range claimed {
		l := domain.LeaseOf(j)
		if i == 0 {
			l.Token = uuid.New() // a zombie's
		}
		step := &jobs.StepRecord{Name: "nap", Seq: 1, Result: []byte(`{}`), StartedAt: time.Now()}
		batch = append(batch, domain.Finish{Lease: l, Outcome: domain.OutcomeSuspended, Step: step,
			Wait: &jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "nap", Until: wake}})
	}
	moved, _, err := b.store.FinishJobs(b.ctx, batch)
	require.NoError(t, err)
	require.True(t, moved[0].LeaseLost(), "the stale lease writes nothing")
	want := map[string]bool{}
	for _, m := range moved[1:] {
		require.Equal(t, jobs.StateWaiting, m.Status)
		want[m.JobID.String()] = true
	}
	require.Equal(t, jobs.StateRunning, b.status(t, claimed[0].ID))
	steps, err := b.store.JobSteps(b.ctx, claimed[1].ID)
	require.NoError(t, err)
	require.Len(t, steps, 1)

	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	for len(want) > 0 {
		note, err := conn.WaitForNotification(ctx)
		require.NoError(t, err, "%d sleepers never announced", len(want))
		for _, part := range strings.Split(note.Payload, ",") {
			id, _, _ := strings.Cut(part, " ")
			delete(want, id)
		}
	}
}
