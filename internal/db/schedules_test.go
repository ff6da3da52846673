package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func TestRecurringIntervalSeries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.enqueue(t, jobs.EnqueueParams{Queue: "rec", IntervalSeconds: 60, Payload: []byte(`{"x":1}`)})
	require.NotNil(t, first.ScheduleID)
	require.NotNil(t, first.ScheduledFor)
	require.Equal(t, jobs.StateQueued, first.Status, "an interval series runs its first occurrence at once")

	// No second pending occurrence while one exists... the first is queued,
	// so the recurrer gives the series its next one, a minute on.
	moved, err := b.store.EnsureNextOccurrences(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	require.Equal(t, jobs.StateScheduled, moved[0].Status)
	next, err := b.store.GetJob(b.ctx, moved[0].JobID)
	require.NoError(t, err)
	require.Equal(t, first.ScheduledFor.Add(time.Minute), *next.ScheduledFor)
	require.Equal(t, *next.ScheduledFor, next.RunAt)

	// Idempotent: a second pass creates nothing.
	moved, err = b.store.EnsureNextOccurrences(b.ctx, 10)
	require.NoError(t, err)
	require.Empty(t, moved)

	// The database refuses a second pending occurrence outright.
	_, err = b.store.Pool().Exec(b.ctx, `
		INSERT INTO jobs (id, type, queue, effective_priority, status, run_at, schedule_id, scheduled_for)
		VALUES (gen_random_uuid(), 'noop', 'rec', 2, 'scheduled', now() + interval '1 hour', $1, now() + interval '1 hour')`, *first.ScheduleID)
	require.ErrorContains(t, err, "jobs_schedule_pending_idx")

	// A failed occurrence does not end the series, and its retry (also
	// scheduled) does not count as the pending occurrence.
	b.runOne(t, "rec", domain.OutcomeFailed)
	require.Equal(t, jobs.StateScheduled, b.status(t, first.ID))
	sc, err := b.store.GetSchedule(b.ctx, *first.ScheduleID)
	require.NoError(t, err)
	require.False(t, sc.Paused)
	require.Equal(t, *next.ScheduledFor, *sc.NextRunAt)
	ran, err := b.store.GetJob(b.ctx, first.ID)
	require.NoError(t, err)
	require.NotNil(t, ran.StartedAt)
	require.Equal(t, *ran.StartedAt, *sc.LastRunAt, "the last run is when the occurrence that ran started")
}

// eventLog records what a store announces.
type eventLog struct {
	mu  sync.Mutex
	evs []domain.Event
}

func (l *eventLog) Publish(evs []domain.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, evs...)
}

func (l *eventLog) statusesOf(id uuid.UUID) []jobs.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []jobs.State
	for _, e := range l.evs {
		if e.JobID == id {
			out = append(out, e.Status)
		}
	}
	return out
}

func TestRecurringPauseResumeRunNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	events := &eventLog{}
	b.store.SetEventSink(events)
	listen, err := b.store.Pool().Acquire(b.ctx)
	require.NoError(t, err)
	defer listen.Release()
	_, err = listen.Exec(b.ctx, `LISTEN `+db.ChannelJobs)
	require.NoError(t, err)
	first := b.enqueue(t, jobs.EnqueueParams{Queue: "rec", Cron: "0 3 * * *", Timezone: "Europe/Berlin"})
	require.Equal(t, jobs.StateScheduled, first.Status)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	require.Equal(t, 3, first.RunAt.In(berlin).Hour())
	id := *first.ScheduleID

	sc, cancelled, err := b.store.PauseSchedule(b.ctx, id)
	require.NoError(t, err)
	require.True(t, sc.Paused)
	require.Equal(t, []uuid.UUID{first.ID}, cancelled, "the occurrence it cancelled, for the audit trail")
	require.Equal(t, jobs.StateCancelled, b.status(t, first.ID))
	require.Contains(t, events.statusesOf(first.ID), jobs.StateCancelled, "pausing announces the cancelled occurrence")
	moved, err := b.store.EnsureNextOccurrences(b.ctx, 10)
	require.NoError(t, err)
	require.Empty(t, moved, "a paused series gets no occurrence")

	sc, err = b.store.ResumeSchedule(b.ctx, id)
	require.NoError(t, err)
	require.False(t, sc.Paused)
	require.NotNil(t, sc.NextRunAt)
	require.Equal(t, 3, sc.NextRunAt.In(berlin).Hour())

	now, err := b.store.RunScheduleNow(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, now.Status)
	require.Equal(t, id, *now.ScheduleID)
	require.Equal(t, []jobs.State{jobs.StateQueued}, events.statusesOf(now.ID))
	wctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	n, err := listen.Conn().WaitForNotification(wctx)
	require.NoError(t, err, "running now wakes the workers")
	require.Equal(t, "rec", n.Payload)

	pending, err := b.store.GetSchedule(b.ctx, id)
	require.NoError(t, err)
	var pendingID uuid.UUID
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM jobs WHERE schedule_id = $1 AND status = 'scheduled'`, pending.ID).Scan(&pendingID))
	cancelled, err = b.store.DeleteSchedule(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{pendingID}, cancelled)
	require.Equal(t, jobs.StateCancelled, b.status(t, pendingID))
	require.Contains(t, events.statusesOf(pendingID), jobs.StateCancelled, "deleting announces the cancelled occurrence")
	_, err = b.store.GetSchedule(b.ctx, id)
	require.ErrorIs(t, err, domain.ErrNotFound)
	got, err := b.store.GetJob(b.ctx, now.ID)
	require.NoError(t, err)
	require.Nil(t, got.ScheduleID, "history stays, unlinked")
}

func TestRecurringCoalescesMissedFirings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	past := time.Now().Add(-3 * time.Hour)
	first := b.enqueue(t, jobs.EnqueueParams{Queue: "rec", IntervalSeconds: 600, RunAt: &past})
	moved, err := b.store.EnsureNextOccurrences(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	next, err := b.store.GetJob(b.ctx, moved[0].JobID)
	require.NoError(t, err)
	require.True(t, next.RunAt.After(time.Now().Add(-time.Second)), "no burst of catch-up runs")
	require.Zero(t, next.ScheduledFor.Sub(*first.ScheduledFor)%(600*time.Second), "still on the series' grid")
}

func TestAgingAndTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := time.Now().Add(-10 * time.Minute)
	med := b.enqueue(t, jobs.EnqueueParams{Priority: 2, RunAt: &old})
	low := b.enqueue(t, jobs.EnqueueParams{Priority: 3, RunAt: &old})
	high := b.enqueue(t, jobs.EnqueueParams{Priority: 1, RunAt: &old})
	fresh := b.enqueue(t, jobs.EnqueueParams{Priority: 3})
	st := domain.DefaultSettings()
	n, err := b.store.AgeQueued(b.ctx, st, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for id, want := range map[*jobs.Job]float64{med: 1.9, low: 2.9, high: 1, fresh: 3} {
		j, err := b.store.GetJob(b.ctx, id.ID)
		require.NoError(t, err)
		require.InDelta(t, want, j.EffectivePriority, 1e-9)
	}
	// Of two processes asking in one interval, one gets the turn.
	ok1, err := b.store.TakeTurn(b.ctx, "ager", "p1", time.Hour)
	require.NoError(t, err)
	ok2, err := b.store.TakeTurn(b.ctx, "ager", "p2", time.Hour)
	require.NoError(t, err)
	require.True(t, ok1)
	require.False(t, ok2)
}

func TestRetentionPrunes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done := b.enqueue(t, jobs.EnqueueParams{Queue: "p"})
	b.runOne(t, "p", domain.OutcomeSucceeded)
	binned := b.enqueue(t, jobs.EnqueueParams{})
	_, err := b.store.DeleteJob(b.ctx, binned.ID)
	require.NoError(t, err)
	keep := b.enqueue(t, jobs.EnqueueParams{})
	st := domain.DefaultSettings()

	n, err := b.store.Prune(b.ctx, st, nil, 100)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is old enough yet")
	later := time.Now().Add(40 * 24 * time.Hour)
	n, err = b.store.Prune(b.ctx, st, &later, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = b.store.GetJob(b.ctx, done.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = b.store.GetJob(b.ctx, binned.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = b.store.GetJob(b.ctx, keep.ID)
	require.NoError(t, err, "waiting jobs are never pruned")
}
