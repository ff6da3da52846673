package db_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// force puts a job straight into a state, as if it had got there by the
// normal path: a running job gets an (already expired) lease, a scheduled
// one is due, a claimed one is leased and has not started.
func (b *testBundle) force(t *testing.T, id uuid.UUID, s jobs.State) {
	t.Helper()
	claimed := s == jobs.StateClaimed
	defer func() {
		if claimed {
			_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET started_at = NULL WHERE id = $1`, id)
			require.NoError(t, err)
		}
	}()
	s = s.Stored()
	_, err := b.store.Pool().Exec(b.ctx, `
		UPDATE jobs SET status = $2,
			attempt = CASE WHEN $2 = 'running' THEN 1 ELSE 0 END,
			executions = CASE WHEN $2 = 'running' THEN 1 ELSE 0 END,
			lease_token = CASE WHEN $2 = 'running' THEN gen_random_uuid() END,
			lease_expires_at = CASE WHEN $2 = 'running' THEN now() - interval '1 second' END,
			worker_id = CASE WHEN $2 = 'running' THEN 'w-forced' END,
			started_at = CASE WHEN $2 = 'running' THEN now() - interval '2 seconds' END,
			wait_kind = CASE WHEN $2 = 'waiting' THEN 'signal' END,
			wait_name = CASE WHEN $2 = 'waiting' THEN 'forced' END,
			run_at = now() - interval '1 second'
		WHERE id = $1`, id, string(s))
	require.NoError(t, err)
}

func (b *testBundle) status(t *testing.T, id uuid.UUID) jobs.State {
	t.Helper()
	j, err := b.store.GetJob(b.ctx, id)
	require.NoError(t, err)
	return j.Status
}

// TestSQLGuardsFollowTheStateMachine runs every state-changing operation of
// the store against a job in every state. An operation must act exactly on
// the states it is declared for, and every move it makes must be one the
// state machine allows.
func TestSQLGuardsFollowTheStateMachine(t *testing.T) {
	t.Parallel()
	dbtest.AdminURL(t) // without a server (-short), skip it whole: the tally below needs every subtest
	var mu sync.Mutex
	exercised := map[[2]jobs.State]bool{}
	for _, o := range storeOps() {
		for _, from := range jobs.States {
			t.Run(fmt.Sprintf("%s_from_%s", o.name, from), func(t *testing.T) {
				t.Parallel()
				// Each subtest has its own database so claim, reap and
				// promote see only its job.
				b := setup(t)
				j := b.enqueue(t, jobs.EnqueueParams{})
				b.force(t, j.ID, from)
				took := o.run(t, b, j.ID)
				require.Equal(t, slices.Contains(o.from, from), took, "did %s act on a %s job", o.name, from)
				to := b.status(t, j.ID)
				if !took {
					require.Equal(t, from, to, "a refused operation must not move the job")
					return
				}
				if o.name == "cancel" && from.Leased() {
					require.Equal(t, from, to, "a leased job is only asked to stop")
					return
				}
				if from == jobs.StateClaimed && o.starts {
					// The outcome carries the handler's start: the job
					// started and ended in one write.
					require.True(t, domain.CanTransition(from, jobs.StateRunning))
					from = jobs.StateRunning
				}
				require.True(t, domain.CanTransition(from, to), "%s moved %s → %s, which the state machine forbids", o.name, from, to)
				mu.Lock()
				exercised[[2]jobs.State{from, to}] = true
				mu.Unlock()
			})
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			requireEveryMoveExercised(t, exercised)
		}
	})
}

// storeOp is a state-changing operation of the store and the states it is
// declared for.
type storeOp struct {
	name string
	from []jobs.State
	// starts says the operation reports a handler's start with it (an
	// outcome of a run that ended before its start was written).
	starts bool
	// run performs the operation on job id; it reports whether the
	// operation took effect.
	run func(t *testing.T, b *testBundle, id uuid.UUID) bool
}

// finishOp finishes the job with outcome, its max_retries set first; it
// took effect unless the lease was lost.
func finishOp(outcome domain.Outcome, maxRetries int) func(t *testing.T, b *testBundle, id uuid.UUID) bool {
	return func(t *testing.T, b *testBundle, id uuid.UUID) bool {
		_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET max_retries = $2 WHERE id = $1`, id, maxRetries)
		require.NoError(t, err)
		j, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		token := uuid.New() // a token that cannot match when not running
		if j.LeaseToken != nil {
			token = *j.LeaseToken
		}
		f := domain.Finish{Lease: domain.Lease{JobID: id, Token: token}, Outcome: outcome, Error: "x", RetryDelay: time.Second}
		if outcome == domain.OutcomeSucceeded || outcome == domain.OutcomeFailed {
			at := time.Now()
			f.StartedAt = &at // the handler ran
		}
		moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{f})
		require.NoError(t, err)
		return !moved[0].LeaseLost()
	}
}

// storeOps are the operations TestSQLGuardsFollowTheStateMachine runs.
func storeOps() []storeOp {
	finish := finishOp
	leased := []jobs.State{jobs.StateClaimed, jobs.StateRunning}
	return append(durableOps(leased), []storeOp{
		{"claim", []jobs.State{jobs.StateQueued}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			return len(b.claim(t, "w", 10, time.Minute)) == 1
		}},
		{"claim_buffered", []jobs.State{jobs.StateQueued}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Limit: 10, LeaseTTL: time.Minute, Buffered: true})
			require.NoError(t, err)
			return len(got) == 1
		}},
		{"start", []jobs.State{jobs.StateClaimed}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			j, err := b.store.GetJob(b.ctx, id)
			require.NoError(t, err)
			if j.LeaseToken == nil {
				return false
			}
			require.NoError(t, b.store.StartJobs(b.ctx, []domain.Start{{Lease: domain.LeaseOf(j), At: time.Now()}}))
			return b.status(t, id) != j.Status
		}},
		{"finish_succeeded", leased, true, finish(domain.OutcomeSucceeded, 3)},
		{"finish_failed_retry", leased, true, finish(domain.OutcomeFailed, 3)},
		{"finish_failed_dead", leased, true, finish(domain.OutcomeFailed, 0)},
		{"finish_cancelled", leased, false, finish(domain.OutcomeCancelled, 3)},
		{"finish_interrupted", leased, false, finish(domain.OutcomeInterrupted, 3)},
		{"reap", leased, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			moved, err := b.store.ReapExpired(b.ctx, nil, 10)
			require.NoError(t, err)
			return len(moved) == 1
		}},
		{"promote", []jobs.State{jobs.StateScheduled, jobs.StateWaiting}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			moved, err := b.store.PromoteDue(b.ctx, nil, 10)
			require.NoError(t, err)
			return len(moved) == 1
		}},
		{"cancel", domain.CancelFrom, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			_, err := b.store.CancelJob(b.ctx, id)
			if err != nil {
				require.ErrorIs(t, err, domain.ErrInvalidTransition)
				return false
			}
			return true
		}},
		{"release", []jobs.State{jobs.StateBlocked}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			// The job's only dependency completes.
			parent := b.enqueue(t, jobs.EnqueueParams{Queue: "parents"})
			_, err := b.store.Pool().Exec(b.ctx, `INSERT INTO job_dependencies (job_id, depends_on_id) VALUES ($1, $2)`, id, parent.ID)
			require.NoError(t, err)
			b.force(t, parent.ID, jobs.StateRunning)
			p, err := b.store.GetJob(b.ctx, parent.ID)
			require.NoError(t, err)
			before := b.status(t, id)
			_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(p), Outcome: domain.OutcomeSucceeded}})
			require.NoError(t, err)
			return b.status(t, id) != before
		}},
		{"rearm", []jobs.State{jobs.StateCancelled}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			// The job was cancelled by a dependency that failed; replaying
			// that dependency re-arms it.
			root := b.enqueue(t, jobs.EnqueueParams{})
			b.force(t, root.ID, jobs.StateDeadLetter)
			_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET cancelled_by = $2 WHERE id = $1`, id, root.ID)
			require.NoError(t, err)
			before := b.status(t, id)
			_, err = b.store.RetryJob(b.ctx, root.ID)
			require.NoError(t, err)
			return b.status(t, id) != before
		}},
		{"retry", domain.RetryFrom, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			_, err := b.store.RetryJob(b.ctx, id)
			if err != nil {
				require.ErrorIs(t, err, domain.ErrInvalidTransition)
				return false
			}
			return true
		}},
	}...)
}

// durableOps are the operations of durable jobs: a suspension (of a
// leased job: a claimed one's handler started and suspended before its
// start was written), a signal.
func durableOps(leased []jobs.State) []storeOp {
	return []storeOp{
		{"finish_suspended", leased, true, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			j, err := b.store.GetJob(b.ctx, id)
			require.NoError(t, err)
			token := uuid.New()
			if j.LeaseToken != nil {
				token = *j.LeaseToken
			}
			moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.Lease{JobID: id, Token: token},
				Outcome: domain.OutcomeSuspended, Wait: &jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: time.Now().Add(time.Hour)}}})
			require.NoError(t, err)
			return !moved[0].LeaseLost()
		}},
		{"signal", []jobs.State{jobs.StateWaiting}, false, func(t *testing.T, b *testBundle, id uuid.UUID) bool {
			// force leaves a waiting job waiting for the signal "forced".
			_, resumed, err := b.store.SendSignal(b.ctx, id, "forced", "", nil)
			if err != nil {
				require.ErrorIs(t, err, domain.ErrInvalidTransition)
			}
			return resumed
		}},
	}
}

// requireEveryMoveExercised requires that every move the state machine
// allows was made by some operation.
func requireEveryMoveExercised(t *testing.T, exercised map[[2]jobs.State]bool) {
	t.Helper()
	// Every allowed move has an operation here, except release into
	// scheduled (a released job whose run_at is ahead), which the
	// workflow tests cover.
	for _, from := range jobs.States {
		for _, to := range jobs.States {
			if !domain.CanTransition(from, to) || from == jobs.StateBlocked && to == jobs.StateScheduled {
				continue
			}
			if !exercised[[2]jobs.State{from, to}] {
				t.Errorf("no store operation performs the allowed move %s → %s", from, to)
			}
		}
	}
}
