package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// promoteAll queues every scheduled and waiting job as if their time had
// come (the scheduler's promoter does it in a running Flint).
func (b *testBundle) promoteAll(t *testing.T) int {
	t.Helper()
	later := time.Now().Add(400 * 24 * time.Hour)
	moved, err := b.store.PromoteDue(b.ctx, &later, 1000)
	require.NoError(t, err)
	return len(moved)
}

// Charge is what the "charge" step returns.
type Charge struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// TestStepsRunOnceAcrossRetries: charge → invoice → email, where the
// email fails the first time: the retry returns the recorded charge and
// invoice without running them again, and the job completes.
func TestStepsRunOnceAcrossRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var charges, invoices, emails atomic.Int32
	b.registry.Register("order", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		c, err := jobs.Step(ctx, "charge", func(ctx context.Context) (Charge, error) {
			n := charges.Add(1)
			return Charge{ID: "ch_" + string(rune('0'+n)), Amount: 1200}, nil
		})
		if err != nil {
			return nil, err
		}
		inv, err := jobs.Step(ctx, "invoice", func(ctx context.Context) (string, error) {
			invoices.Add(1)
			return "inv-for-" + c.ID, nil
		})
		if err != nil {
			return nil, err
		}
		if _, err := jobs.Step(ctx, "email", func(ctx context.Context) (bool, error) {
			if emails.Add(1) == 1 {
				return false, errors.New("mail server said 451")
			}
			return true, nil
		}); err != nil {
			return nil, err
		}
		return map[string]any{"charge": c, "invoice": inv}, nil
	}))
	j := b.enqueue(t, "order", `{}`)
	b.start(t, workers.Config{Workers: 2})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateScheduled))
	require.Equal(t, 1, b.promoteAll(t))
	done := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
	require.Equal(t, int32(1), charges.Load(), "the card is charged once")
	require.Equal(t, int32(1), invoices.Load())
	require.Equal(t, int32(2), emails.Load())
	require.JSONEq(t, `{"charge":{"id":"ch_1","amount":1200},"invoice":"inv-for-ch_1"}`, string(done.Result))
	steps, err := b.store.JobSteps(b.ctx, j.ID)
	require.NoError(t, err)
	require.Len(t, steps, 3)
	require.Equal(t, []int{1, 1, 2}, []int{steps[0].Attempt, steps[1].Attempt, steps[2].Attempt})
}

// TestSleepHoldsNoWorker: a job that sleeps leaves its (only) worker free
// for other jobs, waits with its wake time, and resumes after its
// recorded steps when woken.
func TestSleepHoldsNoWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var before, after atomic.Int32
	b.registry.Register("remind", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		if _, err := jobs.Step(ctx, "invoice", func(ctx context.Context) (int, error) { return int(before.Add(1)), nil }); err != nil {
			return nil, err
		}
		if err := jobs.Sleep(ctx, "cool-off", 1500*time.Millisecond); err != nil {
			return nil, err
		}
		return jobs.Step(ctx, "reminder", func(ctx context.Context) (int, error) { return int(after.Add(1)), nil })
	}))
	j := b.enqueue(t, "remind", `{}`)
	b.start(t, workers.Config{Workers: 1})
	w := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateWaiting))
	require.Equal(t, jobs.WaitSleep, w.WaitingFor.Kind)
	require.Equal(t, "cool-off", w.WaitingFor.Name)
	require.WithinDuration(t, time.Now().Add(1500*time.Millisecond), w.WaitingFor.Until, time.Second)
	require.Equal(t, 0, w.Attempt, "a sleep charges no attempt")

	other := b.enqueue(t, jobs.TypeNoop, `{}`)
	b.waitFor(t, other.ID, 30*time.Second, status(jobs.StateCompleted))
	require.Equal(t, jobs.StateWaiting, b.waitFor(t, j.ID, time.Second, status(jobs.StateWaiting)).Status)

	// The promoter's sweep (by the database clock) wakes it at its time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		moved, err := b.store.PromoteDue(b.ctx, nil, 10)
		require.NoError(t, err)
		if len(moved) == 1 {
			require.False(t, time.Now().Before(w.WaitingFor.Until.Add(-100*time.Millisecond)), "not woken early")
			break
		}
		require.True(t, time.Now().Before(deadline), "not woken")
		time.Sleep(20 * time.Millisecond) // the promoter's sweep, played by the test
	}
	done := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
	require.Equal(t, int32(1), before.Load(), "the step before the sleep ran once")
	require.Equal(t, int32(1), after.Load())
	require.Equal(t, "1", string(done.Result))
	require.Equal(t, 1, done.Attempt)
}

// TestWaitForSignalAndTimeout: a job waiting for a signal resumes with its
// body when it arrives; another times out and resumes with a value that
// says so.
func TestWaitForSignalAndTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("refund", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		sig, err := jobs.WaitForSignal(ctx, "approval", 48*time.Hour)
		if err != nil {
			return nil, err
		}
		if sig.TimedOut {
			return map[string]any{"refunded": false, "reason": "no approval in time"}, nil
		}
		var body struct{ By string }
		if err := sig.Decode(&body); err != nil {
			return nil, err
		}
		return map[string]any{"refunded": true, "approved_by": body.By}, nil
	}))
	approved := b.enqueue(t, "refund", `{}`)
	b.start(t, workers.Config{Workers: 2})
	w := b.waitFor(t, approved.ID, 30*time.Second, status(jobs.StateWaiting))
	require.Equal(t, &jobs.WaitingFor{Kind: "signal", Name: "approval", Until: w.WaitingFor.Until}, w.WaitingFor)
	_, resumed, err := b.store.SendSignal(b.ctx, approved.ID, "approval", "sig-1", []byte(`{"by":"ann"}`))
	require.NoError(t, err)
	require.True(t, resumed)
	done := b.waitFor(t, approved.ID, 30*time.Second, status(jobs.StateCompleted))
	require.JSONEq(t, `{"refunded":true,"approved_by":"ann"}`, string(done.Result))

	late := b.enqueue(t, "refund", `{}`)
	b.waitFor(t, late.ID, 30*time.Second, status(jobs.StateWaiting))
	require.Equal(t, 1, b.promoteAll(t))
	done = b.waitFor(t, late.ID, 30*time.Second, status(jobs.StateCompleted))
	require.JSONEq(t, `{"refunded":false,"reason":"no approval in time"}`, string(done.Result))
}

// TestChangedStepOrderFailsForGood: a retry whose code reaches its steps
// in another order than the recorded one fails for good with an error
// naming both steps, instead of mixing up their results.
func TestChangedStepOrderFailsForGood(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var deployed atomic.Bool
	b.registry.Register("changing", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		names := []string{"a", "b", "c"}
		if deployed.Load() {
			names = []string{"a", "c", "b"} // a new release swapped two steps
		}
		for _, n := range names {
			if _, err := jobs.Step(ctx, n, func(ctx context.Context) (string, error) {
				if n == "c" && !deployed.Load() {
					return "", errors.New("c is not ready")
				}
				return n, nil
			}); err != nil {
				return nil, err
			}
		}
		return "done", nil
	}))
	j := b.enqueue(t, "changing", `{}`)
	b.start(t, workers.Config{Workers: 1})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateScheduled))
	deployed.Store(true)
	b.promoteAll(t)
	dead := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Contains(t, deref(dead.LastError), `step number 2 is "b" in the recorded history but the code asked for "c"`)
}

// TestStepResultTooLarge: a step whose result is over the bound fails the
// job for good, naming the step, and records nothing.
func TestStepResultTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("huge", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		return jobs.Step(ctx, "blob", func(ctx context.Context) (string, error) {
			return strings.Repeat("x", jobs.MaxStepResultBytes), nil
		})
	}))
	j := b.enqueue(t, "huge", `{}`)
	b.start(t, workers.Config{Workers: 1})
	dead := b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Contains(t, deref(dead.LastError), `step "blob": its result is`)
	steps, err := b.store.JobSteps(b.ctx, j.ID)
	require.NoError(t, err)
	require.Empty(t, steps)
}

// TestPushEndpointWaitsForSignal: a push endpoint answers that the job
// waits for a signal; the signal queues it, and the next push carries it
// (and the endpoint's answer completes the job). An answer that asks to
// sleep too long fails the job for good, saying why.
func TestPushEndpointWaitsForSignal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var calls atomic.Int32
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var got struct {
			Signals map[string]struct {
				Body json.RawMessage `json:"body"`
			} `json:"signals"`
			Payload struct {
				Far bool `json:"far"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(body, &got)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case got.Payload.Far:
			_, _ = w.Write([]byte(`{"status": "sleeping", "wake_at": "2999-01-01T00:00:00Z"}`))
		case got.Signals["approval"].Body == nil:
			calls.Add(1)
			_, _ = w.Write([]byte(`{"status": "waiting", "signal": "approval", "timeout_seconds": 3600}`))
		default:
			_, _ = w.Write(append([]byte(`{"approved_with": `), append(got.Signals["approval"].Body, '}')...))
		}
	})
	b.pushQueue(t, "hooks", e.srv.URL)
	j := b.enqueueTo(t, "hooks", "refund", `{}`)
	b.startPusher(t, workers.PusherConfig{})
	w := b.waitJob(t, j.ID, status(jobs.StateWaiting))
	require.Equal(t, "approval", w.WaitingFor.Name)
	require.Equal(t, 0, w.Attempt)
	_, resumed, err := b.store.SendSignal(b.ctx, j.ID, "approval", "", []byte(`{"by":"ann"}`))
	require.NoError(t, err)
	require.True(t, resumed)
	done := b.waitJob(t, j.ID, status(jobs.StateCompleted))
	require.JSONEq(t, `{"approved_with": {"by": "ann"}}`, string(done.Result))
	require.Equal(t, int32(1), calls.Load())

	far := b.enqueueTo(t, "hooks", "refund", `{"far": true}`)
	dead := b.waitJob(t, far.ID, status(jobs.StateDeadLetter))
	require.Contains(t, deref(dead.LastError), "wake_at: is more than 366 days ahead")
}
