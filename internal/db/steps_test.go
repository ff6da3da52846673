package db_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// suspend ends j's attempt waiting as w says (with the sleep's step).
func (b *testBundle) suspend(t *testing.T, j *jobs.Job, w jobs.WaitingFor, step *jobs.StepRecord) domain.Moved {
	t.Helper()
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSuspended, Wait: &w, Step: step}})
	require.NoError(t, err)
	return moved[0]
}

// TestStepsRecordedOnceAndFenced: a step is recorded once by the lease
// holder; the same name again returns the first record; a zombie whose
// lease moved to another attempt writes nothing; the next claim carries
// the steps in order.
func TestStepsRecordedOnceAndFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "steps"})
	first := b.claimQueue(t, "steps")[0]
	require.False(t, first.Durable)
	require.Nil(t, first.Steps, "a job that never recorded a step reads none")

	rec, wrote, err := b.store.RecordStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "charge", Result: json.RawMessage(`{"charge_id":"ch_1"}`)})
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 1, rec.Seq)
	require.Equal(t, 1, rec.Attempt)
	again, wrote, err := b.store.RecordStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "charge", Result: json.RawMessage(`{"charge_id":"ch_2"}`)})
	require.NoError(t, err)
	require.False(t, wrote, "a name already recorded is not recorded again")
	require.JSONEq(t, `{"charge_id":"ch_1"}`, string(again.Result))
	_, _, err = b.store.RecordStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "invoice", Result: json.RawMessage(`7`)})
	require.NoError(t, err)

	// The lease lapses and another worker claims the job: the first
	// worker is now a zombie.
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	require.NoError(t, err)
	_, err = b.store.ReapExpired(b.ctx, nil, 10)
	require.NoError(t, err)
	second := b.claimQueue(t, "steps")[0]
	require.True(t, second.Durable)
	require.Len(t, second.Steps, 2)
	require.Equal(t, []string{"charge", "invoice"}, []string{second.Steps[0].Name, second.Steps[1].Name})
	require.JSONEq(t, `{"charge_id":"ch_1"}`, string(second.Steps[0].Result))

	_, _, err = b.store.RecordStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "email", Result: json.RawMessage(`"zombie"`)})
	require.ErrorIs(t, err, domain.ErrLeaseLost, "the zombie's write is refused")
	steps, err := b.store.JobSteps(b.ctx, j.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2, "and changes nothing")

	rec, wrote, err = b.store.RecordStep(b.ctx, domain.LeaseOf(second), jobs.StepRecord{Name: "email", Result: json.RawMessage(`"sent"`)})
	require.NoError(t, err)
	require.True(t, wrote)
	require.Equal(t, 3, rec.Seq)
	require.Equal(t, second.Attempt, rec.Attempt)
}

// TestSleepWaitsAndWakes: a sleeping attempt is refunded and leaves the
// job waiting until its wake time with its step recorded; the promoter's
// sweep queues it then, and the claim carries the sleep's step.
func TestSleepWaitsAndWakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "sleepy"})
	c := b.claimQueue(t, "sleepy")[0]
	wake := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	m := b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSleep, Name: "cool-off", Until: wake},
		&jobs.StepRecord{Name: "cool-off", Result: json.RawMessage(`{"wake_at":"` + wake.UTC().Format(time.RFC3339Nano) + `"}`), StartedAt: time.Now()})
	require.Equal(t, jobs.StateWaiting, m.Status)

	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateWaiting, got.Status)
	require.Equal(t, 0, got.Attempt, "the attempt is refunded")
	require.Equal(t, &jobs.WaitingFor{Kind: "sleep", Name: "cool-off", Until: wake}, normalised(got.WaitingFor))
	execs, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.Equal(t, domain.Outcome("suspended"), execs[len(execs)-1].Outcome)

	early := time.Now()
	moved, err := b.store.PromoteDue(b.ctx, &early, 100)
	require.NoError(t, err)
	require.Empty(t, moved, "not before its time")
	later := wake.Add(time.Second)
	moved, err = b.store.PromoteDue(b.ctx, &later, 100)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	require.Equal(t, jobs.StateQueued, moved[0].Status)
	again := b.claimQueue(t, "sleepy")[0]
	require.Equal(t, 1, again.Attempt)
	require.Len(t, again.Steps, 1)
	require.Equal(t, "cool-off", again.Steps[0].Name)
	require.Empty(t, again.Signals, "a sleep leaves no signal")
}

func normalised(w *jobs.WaitingFor) *jobs.WaitingFor {
	if w == nil {
		return nil
	}
	c := *w
	c.Until = c.Until.Truncate(time.Millisecond)
	return &c
}

// TestSignals: a signal sent before the wait is kept for it (the wait
// then does not wait); one sent during the wait resumes the job; the same
// id twice delivers once; a finished job refuses with a transition
// error; an unknown job is not found.
func TestSignals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	early := b.enqueue(t, jobs.EnqueueParams{Queue: "sig"})
	fresh, resumed, err := b.store.SendSignal(b.ctx, early.ID, "approval", "s-1", []byte(`{"ok":true}`))
	require.NoError(t, err)
	require.True(t, fresh)
	require.False(t, resumed, "kept: the job is not waiting yet")
	fresh, _, err = b.store.SendSignal(b.ctx, early.ID, "approval", "s-1", []byte(`{"ok":false}`))
	require.NoError(t, err)
	require.False(t, fresh, "the same id twice delivers once")

	c := b.claimQueue(t, "sig")[0]
	require.JSONEq(t, `{"ok":true}`, string(c.Signals["approval"].Body), "the claim carries the signal kept for it")
	m := b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "approval", Until: time.Now().Add(time.Hour)}, nil)
	require.Equal(t, jobs.StateQueued, m.Status, "a wait whose signal is there does not wait")
	c = b.claimQueue(t, "sig")[0]
	b.finish(t, c, domain.Finish{Lease: domain.LeaseOf(c), Outcome: domain.OutcomeSucceeded})
	_, _, err = b.store.SendSignal(b.ctx, early.ID, "approval", "", nil)
	var te *domain.TransitionError
	require.ErrorAs(t, err, &te, "a finished job refuses signals")
	require.Equal(t, jobs.StateCompleted, te.From)

	late := b.enqueue(t, jobs.EnqueueParams{Queue: "sig2"})
	c = b.claimQueue(t, "sig2")[0]
	m = b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "approval", Until: time.Now().Add(48 * time.Hour)}, nil)
	require.Equal(t, jobs.StateWaiting, m.Status)
	_, resumed, err = b.store.SendSignal(b.ctx, late.ID, "other", "", []byte(`1`))
	require.NoError(t, err)
	require.False(t, resumed, "another name leaves it waiting")
	require.Equal(t, jobs.StateWaiting, b.status(t, late.ID))
	_, resumed, err = b.store.SendSignal(b.ctx, late.ID, "approval", "", []byte(`{"by":"ann"}`))
	require.NoError(t, err)
	require.True(t, resumed)
	c = b.claimQueue(t, "sig2")[0]
	require.JSONEq(t, `{"by":"ann"}`, string(c.Signals["approval"].Body))
	require.NotNil(t, c.Signals["approval"].At)
	require.JSONEq(t, `1`, string(c.Signals["other"].Body))

	_, _, err = b.store.SendSignal(b.ctx, uuid.New(), "approval", "", nil)
	require.True(t, errors.Is(err, domain.ErrNotFound))
}

// TestWaitTimesOutAndEvents: a wait past its timeout is queued with a
// timeout the claim tells apart from a signal; an event reaches every job
// waiting for it, and only those.
func TestWaitTimesOutAndEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "timeout"})
	c := b.claimQueue(t, "timeout")[0]
	until := time.Now().Add(time.Minute)
	b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "approval", Until: until}, nil)
	past := until.Add(time.Second)
	moved, err := b.store.PromoteDue(b.ctx, &past, 10)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	c = b.claimQueue(t, "timeout")[0]
	require.Equal(t, j.ID, c.ID)
	require.True(t, c.Signals["approval"].TimedOut)

	var waiting []uuid.UUID
	for range 3 {
		e := b.enqueue(t, jobs.EnqueueParams{Queue: "ev"})
		waiting = append(waiting, e.ID)
	}
	for _, c := range b.claimQueue(t, "ev") {
		b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitEvent, Name: "order.paid:1234", Until: time.Now().Add(time.Hour)}, nil)
	}
	other := b.enqueue(t, jobs.EnqueueParams{Queue: "ev-other"})
	c = b.claimQueue(t, "ev-other")[0]
	b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitEvent, Name: "order.paid:999", Until: time.Now().Add(time.Hour)}, nil)

	n, err := b.store.SendEvent(b.ctx, "order.paid:1234", []byte(`{"amount":12}`), nil)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, id := range waiting {
		require.Equal(t, jobs.StateQueued, b.status(t, id))
	}
	require.Equal(t, jobs.StateWaiting, b.status(t, other.ID))
	for _, c := range b.claimQueue(t, "ev") {
		require.JSONEq(t, `{"amount":12}`, string(c.Signals["order.paid:1234"].Body))
	}
	n, err = b.store.SendEvent(b.ctx, "order.paid:1234", nil, []string{"ev"})
	require.NoError(t, err)
	require.Zero(t, n, "an event is not kept for jobs not waiting")
}

// TestCancelWaitingJob: a waiting job is counted in the stats and its
// queue's counts, and is cancelled at once.
func TestCancelWaitingJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "cw"})
	c := b.claimQueue(t, "cw")[0]
	b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: time.Now().Add(time.Hour)}, nil)
	st, err := b.store.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.ByStatus["waiting"], "stats count waiting jobs")
	q, err := b.store.GetQueue(b.ctx, "cw")
	require.NoError(t, err)
	require.Equal(t, int64(1), q.Counts[jobs.StateWaiting], "and so do the queue's counts")
	got, err := b.store.CancelJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateCancelled, got.Status)
	require.Nil(t, got.WaitingFor)
}

// TestConcurrentSteps: records of many jobs made at once each land once,
// steps of one job recorded at once are numbered apart (the fenced lock
// serialises them), and a stale lease among them is refused without
// failing the others.
func TestConcurrentSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 64
	for range n {
		b.enqueue(t, jobs.EnqueueParams{Queue: "many"})
	}
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"many"}, Limit: n, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	type rec struct {
		job  uuid.UUID
		name string
		err  error
	}
	out := make(chan rec, 3*n)
	for _, j := range claimed {
		for _, name := range []string{"a", "b"} {
			go func() {
				_, _, err := b.store.RecordStep(b.ctx, domain.LeaseOf(j), jobs.StepRecord{Name: name, Result: json.RawMessage(`1`)})
				out <- rec{j.ID, name, err}
			}()
		}
		go func() {
			stale := domain.Lease{JobID: j.ID, Token: uuid.New()}
			_, _, err := b.store.RecordStep(b.ctx, stale, jobs.StepRecord{Name: "zombie"})
			out <- rec{j.ID, "zombie", err}
		}()
	}
	for range 3 * n {
		r := <-out
		if r.name == "zombie" {
			require.ErrorIs(t, r.err, domain.ErrLeaseLost)
		} else {
			require.NoError(t, r.err)
		}
	}
	for _, j := range claimed {
		steps, err := b.store.JobSteps(b.ctx, j.ID)
		require.NoError(t, err)
		require.Len(t, steps, 2)
		require.Equal(t, []int{1, 2}, []int{steps[0].Seq, steps[1].Seq})
	}
}

// TestSuspendAfterCancelRequest: a job whose cancellation was asked while
// it ran is cancelled when its attempt ends waiting, and so are the jobs
// that depend on it.
func TestSuspendAfterCancelRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "cr"})
	child := b.enqueue(t, jobs.EnqueueParams{Queue: "cr-child", DependsOn: []uuid.UUID{j.ID}})
	c := b.claimQueue(t, "cr")[0]
	_, err := b.store.CancelJob(b.ctx, j.ID)
	require.NoError(t, err)
	m := b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: time.Now().Add(time.Hour)}, nil)
	require.Equal(t, jobs.StateCancelled, m.Status)
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Nil(t, got.WaitingFor)
	require.NotNil(t, got.FinishedAt)
	require.Equal(t, jobs.StateCancelled, b.status(t, child.ID), "downstream cancelled with it")
}
