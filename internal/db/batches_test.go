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

// newBatch creates a batch of n noop members in queue q with the given
// callbacks (each a noop in queue "cb-<kind>").
func (b *testBundle) newBatch(t *testing.T, q string, n int, open bool, kinds ...string) *domain.Batch {
	t.Helper()
	p := domain.BatchParams{Open: open, Callbacks: map[string]jobs.EnqueueParams{}}
	for i := range n {
		p.Jobs = append(p.Jobs, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: q, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			Priority: jobs.DefaultPriority})
	}
	for _, k := range kinds {
		p.Callbacks[k] = jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "cb-" + k, Priority: jobs.DefaultPriority}
	}
	batch, out, err := b.store.CreateBatch(b.ctx, p)
	require.NoError(t, err)
	require.Len(t, out, n)
	for _, e := range out {
		require.Equal(t, batch.ID, *e.Job.BatchID)
	}
	return batch
}

// finishAll claims and finishes every claimable job of queue q with
// outcome, from workers goroutines at once.
func (b *testBundle) finishAll(t *testing.T, q string, workers int, outcome func(j *jobs.Job) domain.Finish) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: fmt.Sprintf("w%d", w), Queues: []string{q}, Limit: 7, LeaseTTL: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				fs := make([]domain.Finish, len(got))
				for i, j := range got {
					fs[i] = outcome(j)
				}
				if _, _, err := b.store.FinishJobs(b.ctx, fs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func succeed(j *jobs.Job) domain.Finish {
	return domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded, Result: json.RawMessage(fmt.Sprintf(`{"of":%s}`, j.Payload))}
}

// callbackJobs lists the jobs in queue q (where a callback kind's jobs go).
func (b *testBundle) countQueue(t *testing.T, q string) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE queue = $1`, q).Scan(&n))
	return n
}

// TestBatchSettlesOnceUnderConcurrentFinishes: eight goroutines finish a
// batch's 400 members in small statements at once; on_success and
// on_complete are each enqueued exactly once, on_death never, and the
// callback reads the batch's counts and every member's result.
func TestBatchSettlesOnceUnderConcurrentFinishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	batch := b.newBatch(t, "members", 400, false, domain.OnSuccess, domain.OnComplete, domain.OnDeath)
	require.Equal(t, domain.BatchRunning, batch.State)
	require.Equal(t, 400, batch.Total)
	require.Equal(t, map[string]int{"queued": 400}, batch.Counts)
	require.Equal(t, domain.CallbackPending, batch.Callbacks[domain.OnSuccess].Status)

	b.finishAll(t, "members", 8, succeed)

	got, err := b.store.GetBatch(b.ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, domain.BatchSucceeded, got.State)
	require.Equal(t, map[string]int{"completed": 400}, got.Counts)
	require.NotNil(t, got.SettledAt)
	require.Equal(t, "queued", got.Callbacks[domain.OnSuccess].Status)
	require.Equal(t, "queued", got.Callbacks[domain.OnComplete].Status)
	require.Equal(t, domain.CallbackSkipped, got.Callbacks[domain.OnDeath].Status)
	require.Equal(t, 1, b.countQueue(t, "cb-on_success"))
	require.Equal(t, 1, b.countQueue(t, "cb-on_complete"))
	require.Equal(t, 0, b.countQueue(t, "cb-on_death"))

	cb := b.claimQueue(t, "cb-on_success")
	require.Len(t, cb, 1)
	require.Equal(t, got.Callbacks[domain.OnSuccess].ID, cb[0].ID)
	var summary jobs.BatchSummary
	require.NoError(t, json.Unmarshal(cb[0].Parents[jobs.BatchParent], &summary))
	require.Equal(t, jobs.BatchSummary{ID: batch.ID.String(), Total: 400, Counts: map[string]int{"completed": 400}}, summary)
	require.Len(t, cb[0].Parents, 401, "the batch and each member's result")
	for k, v := range cb[0].Parents {
		if k != jobs.BatchParent {
			require.Contains(t, string(v), `{"of": {"i": `, "member %s", k)
		}
	}
}

// TestBatchDeathAndReplay: the first member to reach the dead-letter
// queue fires on_death (once, though two die); the batch settles dead with
// on_complete and without on_success; replaying the dead members until
// they complete fires on_success then.
func TestBatchDeathAndReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	batch := b.newBatch(t, "m", 10, false, domain.OnSuccess, domain.OnComplete, domain.OnDeath)
	var dead []uuid.UUID
	b.finishAll(t, "m", 3, func(j *jobs.Job) domain.Finish {
		if string(j.Payload) == `{"i": 3}` || string(j.Payload) == `{"i": 7}` {
			return domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeFailed, Final: true, Error: "boom"}
		}
		return succeed(j)
	})
	got, err := b.store.GetBatch(b.ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, domain.BatchDead, got.State)
	require.Equal(t, map[string]int{"completed": 8, "dead_letter": 2}, got.Counts)
	require.NotNil(t, got.DiedAt)
	require.Equal(t, 1, b.countQueue(t, "cb-on_death"))
	require.Equal(t, 1, b.countQueue(t, "cb-on_complete"))
	require.Equal(t, 0, b.countQueue(t, "cb-on_success"))
	require.Equal(t, domain.CallbackSkipped, got.Callbacks[domain.OnSuccess].Status)

	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT array_agg(id) FROM jobs WHERE batch_id = $1 AND status = 'dead_letter'`, batch.ID).Scan(&dead))
	require.Len(t, dead, 2)
	for _, id := range dead {
		_, err := b.store.RetryJob(b.ctx, id)
		require.NoError(t, err)
	}
	got, err = b.store.GetBatch(b.ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, domain.BatchRunning, got.State, "replayed members are unfinished again")
	b.finishAll(t, "m", 2, succeed)
	got, err = b.store.GetBatch(b.ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, domain.BatchSucceeded, got.State)
	require.Equal(t, 1, b.countQueue(t, "cb-on_success"), "every member completed in the end")
	require.Equal(t, 1, b.countQueue(t, "cb-on_complete"), "settled once")
	require.Equal(t, 1, b.countQueue(t, "cb-on_death"))
}

// TestOpenBatch: an open batch takes members until it is closed, settles
// only once closed (at the close itself when every member has finished),
// and refuses members afterwards, adding nothing.
func TestOpenBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	batch := b.newBatch(t, "open", 2, true, domain.OnComplete)
	require.Equal(t, domain.BatchOpen, batch.State)
	b.finishAll(t, "open", 1, succeed)
	got, err := b.store.GetBatch(b.ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, domain.BatchOpen, got.State, "an open batch does not settle")
	require.Equal(t, 0, b.countQueue(t, "cb-on_complete"))

	_, out, err := b.store.AddToBatch(b.ctx, batch.ID, []jobs.EnqueueParams{{Type: jobs.TypeNoop, Queue: "open", Priority: 2}})
	require.NoError(t, err)
	require.Len(t, out, 1)
	b.finishAll(t, "open", 1, succeed)
	got, err = b.store.CloseBatch(b.ctx, batch.ID)
	require.NoError(t, err)
	require.Equal(t, domain.BatchSucceeded, got.State)
	require.Equal(t, 3, got.Total)
	require.Equal(t, 1, b.countQueue(t, "cb-on_complete"), "the close settled it")

	_, _, err = b.store.AddToBatch(b.ctx, batch.ID, []jobs.EnqueueParams{{Type: jobs.TypeNoop, Queue: "late", Priority: 2}})
	require.ErrorIs(t, err, domain.ErrBatchClosed)
	require.Equal(t, 0, b.countQueue(t, "late"), "nothing half-applied")
	_, err = b.store.CloseBatch(b.ctx, batch.ID)
	require.NoError(t, err, "closing twice is harmless")

	_, _, err = b.store.AddToBatch(b.ctx, uuid.Must(uuid.NewV7()), []jobs.EnqueueParams{{Type: jobs.TypeNoop, Queue: "late", Priority: 2}})
	require.ErrorIs(t, err, domain.ErrNotFound)
	empty := b.newBatch(t, "none", 0, true)
	_, err = b.store.CloseBatch(b.ctx, empty.ID)
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
}
