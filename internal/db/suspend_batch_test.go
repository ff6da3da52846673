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

// TestSuspendedBatchOfEveryKind: one finish carrying every way an attempt
// can end suspended is written as each would be alone: a sleep ahead
// waits and a sleep already due is queued; a wait whose signal was kept is
// queued and one without waits; a job asked to cancel is cancelled; a
// sleep without a name (a pull worker's) is named after the job's last
// step, and a sleep's step is numbered after the steps before it; a
// stale lease changes nothing; every attempt written is refunded and
// recorded as suspended.
func TestSuspendedBatchOfEveryKind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "kinds"
	b.enqueueN(t, 7, jobs.EnqueueParams{Queue: q})
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{q}, Limit: 7, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, 7)
	ahead, gone := time.Now().Add(time.Hour), time.Now().Add(-time.Second)
	sleepStep := func(name string) *jobs.StepRecord {
		return &jobs.StepRecord{Name: name, Result: []byte(`{}`), StartedAt: time.Now()}
	}
	sleepAhead, sleepDue, kept, unkept, cancelled, unnamed, stale := claimed[0], claimed[1], claimed[2], claimed[3], claimed[4], claimed[5], claimed[6]
	_, _, err = b.store.SendSignal(b.ctx, kept.ID, "go", "", []byte(`1`))
	require.NoError(t, err)
	_, err = b.store.CancelJob(b.ctx, cancelled.ID)
	require.NoError(t, err)
	for _, j := range []*jobs.Job{sleepAhead, unnamed} {
		_, _, err = b.store.RecordStep(b.ctx, domain.LeaseOf(j), jobs.StepRecord{Name: "charge", Result: []byte(`1`), StartedAt: time.Now()})
		require.NoError(t, err)
	}
	staleLease := domain.LeaseOf(stale)
	staleLease.Token = uuid.New()
	batch := []domain.Finish{
		{Lease: domain.LeaseOf(sleepAhead), Step: sleepStep("nap"), Wait: &jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "nap", Until: ahead}},
		{Lease: domain.LeaseOf(sleepDue), Step: sleepStep("nap"), Wait: &jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "nap", Until: gone}},
		{Lease: domain.LeaseOf(kept), Wait: &jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: ahead}},
		{Lease: domain.LeaseOf(unkept), Wait: &jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: ahead}},
		{Lease: domain.LeaseOf(cancelled), Wait: &jobs.WaitingFor{Kind: jobs.WaitEvent, Name: "order.paid:1", Until: ahead}},
		{Lease: domain.LeaseOf(unnamed), Wait: &jobs.WaitingFor{Kind: jobs.WaitSleep, Until: ahead}},
		{Lease: staleLease, Step: sleepStep("nap"), Wait: &jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "nap", Until: ahead}},
	}
	for i := range batch {
		batch[i].Outcome = domain.OutcomeSuspended
	}
	moved, _, err := b.store.FinishJobs(b.ctx, batch)
	require.NoError(t, err)
	want := []jobs.State{jobs.StateWaiting, jobs.StateQueued, jobs.StateQueued, jobs.StateWaiting, jobs.StateCancelled, jobs.StateWaiting, ""}
	for i, m := range moved {
		require.Equal(t, batch[i].JobID, m.JobID, "outcome %d", i)
		require.Equal(t, want[i], m.Status, "outcome %d", i)
		require.Equal(t, want[i] == "", m.LeaseLost(), "outcome %d", i)
	}

	waiting := func(j *jobs.Job) *jobs.WaitingFor {
		got, err := b.store.GetJob(b.ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, 0, got.Attempt, "the attempt of %s is refunded", j.ID)
		execs, err := b.store.ListExecutions(b.ctx, got)
		require.NoError(t, err)
		require.Equal(t, domain.Outcome("suspended"), execs[len(execs)-1].Outcome)
		return normalised(got.WaitingFor)
	}
	require.Equal(t, &jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "nap", Until: ahead.Truncate(time.Millisecond)}, waiting(sleepAhead))
	require.Nil(t, waiting(sleepDue))
	require.Nil(t, waiting(kept))
	require.Equal(t, &jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: ahead.Truncate(time.Millisecond)}, waiting(unkept))
	require.Nil(t, waiting(cancelled))
	require.Equal(t, "charge", waiting(unnamed).Name, "a sleep without a name is named after the last step")

	steps, err := b.store.JobSteps(b.ctx, sleepAhead.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.Equal(t, []string{"charge", "nap"}, []string{steps[0].Name, steps[1].Name})
	require.Equal(t, []int{1, 2}, []int{steps[0].Seq, steps[1].Seq})
	steps, err = b.store.JobSteps(b.ctx, stale.ID)
	require.NoError(t, err)
	require.Empty(t, steps, "a stale lease records no step")
	require.Equal(t, jobs.StateRunning, b.status(t, stale.ID))
}
