package db_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestNumberedStepsShareCommits: steps numbered by their workers, recorded
// by many jobs at once, land once each with their numbers, in fewer
// statements than steps; the jobs become durable and their next claim
// carries the steps; a start that comes with a step is written; a stale lease among them is refused and writes
// nothing, without failing its neighbours.
func TestNumberedStepsShareCommits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 64
	b.enqueueN(t, n, jobs.EnqueueParams{Queue: "shared"})
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"shared"}, Limit: n, LeaseTTL: time.Minute, Buffered: true})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	began := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	batches0, steps0 := b.store.StepCommits()

	type rec struct {
		job    uuid.UUID
		name   string
		got    jobs.StepRecord
		fresh  bool
		err    error
		zombie bool
	}
	out := make(chan rec, 3*n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, j := range claimed {
		for seq, name := range []string{"a", "b"} {
			wg.Go(func() {
				<-start
				st := jobs.StepRecord{Name: name, Seq: seq + 1, Attempt: j.Attempt, Result: json.RawMessage(fmt.Sprintf(`"%s-%s"`, j.ID, name))}
				var start *time.Time
				if seq == 0 {
					start = &began // the attempt's start goes with its first step
				}
				got, fresh, err := b.store.CommitStep(b.ctx, domain.LeaseOf(j), st, start)
				out <- rec{j.ID, name, got, fresh, err, false}
			})
		}
		wg.Go(func() {
			<-start
			stale := domain.Lease{JobID: j.ID, Token: uuid.New()}
			got, fresh, err := b.store.CommitStep(b.ctx, stale, jobs.StepRecord{Name: "zombie", Seq: 3}, nil)
			out <- rec{j.ID, "zombie", got, fresh, err, true}
		})
	}
	close(start)
	wg.Wait()
	close(out)
	for r := range out {
		if r.zombie {
			require.ErrorIs(t, r.err, domain.ErrLeaseLost)
			continue
		}
		require.NoError(t, r.err)
		require.True(t, r.fresh)
		require.JSONEq(t, fmt.Sprintf(`"%s-%s"`, r.job, r.name), string(r.got.Result))
		require.Equal(t, 1, r.got.Attempt)
		require.False(t, r.got.RecordedAt.IsZero())
	}
	batches, steps := b.store.StepCommits()
	require.Equal(t, uint64(2*n), steps-steps0, "every step recorded by the committer")
	require.Less(t, batches-batches0, uint64(2*n), "steps recorded at the same moment share statements")

	ids := make([]uuid.UUID, n)
	for i, j := range claimed {
		ids[i] = j.ID
		st, err := b.store.JobSteps(b.ctx, j.ID)
		require.NoError(t, err)
		require.Len(t, st, 2, "the zombie wrote nothing")
		require.Equal(t, []string{"a", "b"}, []string{st[0].Name, st[1].Name})
		require.Equal(t, []int{1, 2}, []int{st[0].Seq, st[1].Seq})
	}
	var durable, started int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FILTER (WHERE durable), count(*) FILTER (WHERE started_at = $2)
		FROM jobs WHERE id = ANY($1)`, ids, began).Scan(&durable, &started))
	require.Equal(t, n, durable)
	require.Equal(t, n, started, "each job's start written with its first step")
}

// TestNumberedStepFencedAndOnce: a numbered step already recorded under a
// name returns the first record (not written again); after the lease
// moves, the old holder's numbered step is refused, and the new holder's
// is recorded.
func TestNumberedStepFencedAndOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "fence"})
	first := b.claimQueue(t, "fence")[0]
	rec, fresh, err := b.store.CommitStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "charge", Seq: 1, Result: json.RawMessage(`{"id":1}`)}, nil)
	require.NoError(t, err)
	require.True(t, fresh)
	require.Equal(t, 1, rec.Seq)
	again, fresh, err := b.store.CommitStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "charge", Seq: 2, Result: json.RawMessage(`{"id":2}`)}, nil)
	require.NoError(t, err)
	require.False(t, fresh, "a name already recorded is not recorded again")
	require.JSONEq(t, `{"id":1}`, string(again.Result))
	require.Equal(t, 1, again.Seq)

	_, err = b.store.Pool().Exec(b.ctx, `UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, j.ID)
	require.NoError(t, err)
	_, err = b.store.ReapExpired(b.ctx, nil, 10)
	require.NoError(t, err)
	second := b.claimQueue(t, "fence")[0]
	require.Len(t, second.Steps, 1)

	_, _, err = b.store.CommitStep(b.ctx, domain.LeaseOf(first), jobs.StepRecord{Name: "invoice", Seq: 2, Result: json.RawMessage(`"zombie"`)}, nil)
	require.ErrorIs(t, err, domain.ErrLeaseLost, "the zombie's write is refused")
	rec, fresh, err = b.store.CommitStep(b.ctx, domain.LeaseOf(second), jobs.StepRecord{Name: "invoice", Seq: 2, Result: json.RawMessage(`"live"`)}, nil)
	require.NoError(t, err)
	require.True(t, fresh)
	require.Equal(t, second.Attempt, rec.Attempt)
	steps, err := b.store.JobSteps(b.ctx, j.ID)
	require.NoError(t, err)
	require.Len(t, steps, 2)
	require.JSONEq(t, `"live"`, string(steps[1].Result))
}

// TestNumberedStepRefusedAlone: a step the database refuses for its data
// fails alone; the steps that shared its batch are recorded.
func TestNumberedStepRefusedAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 32
	b.enqueueN(t, n, jobs.EnqueueParams{Queue: "bad"})
	claimed, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"bad"}, Limit: n, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, j := range claimed {
		wg.Go(func() {
			<-start
			result := json.RawMessage(`1`)
			if i == 0 {
				result = json.RawMessage(`{not json`)
			}
			_, _, errs[i] = b.store.CommitStep(b.ctx, domain.LeaseOf(j), jobs.StepRecord{Name: "s", Seq: 1, Result: result}, nil)
		})
	}
	close(start)
	wg.Wait()
	require.Error(t, errs[0])
	for i := 1; i < n; i++ {
		require.NoError(t, errs[i], "step %d", i)
	}
	var recorded int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM job_steps`).Scan(&recorded))
	require.Equal(t, n-1, recorded)
}
