package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// signalResult is what one SendSignal answered.
type signalResult struct {
	fresh, resumed bool
	err            error
}

// signalRig sends signals from goroutines and keeps their answers by
// label.
type signalRig struct {
	b       *testBundle
	wg      sync.WaitGroup
	mu      sync.Mutex
	results map[string][]signalResult
}

func (r *signalRig) send(label string, id uuid.UUID, name, dedupe, body string) {
	r.wg.Go(func() {
		fresh, resumed, err := r.b.store.SendSignal(r.b.ctx, id, name, dedupe, []byte(body))
		r.mu.Lock()
		defer r.mu.Unlock()
		r.results[label] = append(r.results[label], signalResult{fresh, resumed, err})
	})
}

// jam makes every writer of signals wait: it locks three jobs in a
// transaction of its own and sends each a signal ("jam-0" to "jam-2"),
// one at a time: the first is written by its sender's goroutine (nothing
// else is being written), the next two by the two flushers, and all three
// block on the locks. Signals sent until the returned release is called
// queue up for the next batch.
func (r *signalRig) jam(t *testing.T, ids ...uuid.UUID) (release func()) {
	t.Helper()
	require.Len(t, ids, 3)
	tx, err := r.b.store.Pool().Begin(r.b.ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // unblocks them if the test fails first
	_, err = tx.Exec(r.b.ctx, `SELECT 1 FROM jobs WHERE id = ANY($1) FOR UPDATE`, ids)
	require.NoError(t, err)
	for i, id := range ids {
		r.send(fmt.Sprint("jam-", i), id, "go", "", `"jam"`)
		waitUntil(t, "the signal writers to wait for the locks", func() bool {
			var n int
			require.NoError(t, r.b.store.Pool().QueryRow(r.b.ctx,
				`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
			return n == i+1
		})
	}
	return func() { require.NoError(t, tx.Rollback(r.b.ctx)) }
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// TestSignalsShareCommits: signals sent while others are being written
// are delivered together, in one statement, and each sender's answer is
// its own: every waiting job resumes once, a repeated sender's id is kept
// once even when both copies arrive together, two signals of different
// names to one job both land (the one it waits for resumes it), a
// finished job refuses, an unknown job is not found, and a body the
// database refuses fails only its own sender.
func TestSignalsShareCommits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 200
	var waiting []uuid.UUID
	for range n {
		waiting = append(waiting, b.enqueue(t, jobs.EnqueueParams{Queue: "sig"}).ID)
	}
	for _, c := range b.claim(t, "w", n, time.Minute) {
		b.suspend(t, c, jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "go", Until: time.Now().Add(time.Hour)}, nil)
	}
	done := b.enqueue(t, jobs.EnqueueParams{Queue: "done"})
	c := b.claimQueue(t, "done")[0]
	b.finish(t, c, domain.Finish{Lease: domain.LeaseOf(c), Outcome: domain.OutcomeSucceeded})
	r := &signalRig{b: b, results: map[string][]signalResult{}}

	before, _ := b.store.SignalCommits()
	release := r.jam(t, waiting[0], waiting[1], waiting[2])
	for i := 3; i < n; i++ {
		r.send(fmt.Sprint("go-", i), waiting[i], "go", "", fmt.Sprint(i))
	}
	// The first job also gets another name twice with one sender's id.
	r.send("repeat", waiting[0], "note", "same-id", `"hi"`)
	r.send("repeat", waiting[0], "note", "same-id", `"hi"`)
	r.send("finished", done.ID, "go", "", `1`)
	r.send("missing", uuid.New(), "go", "", `1`)
	waitUntil(t, "the signals to queue", func() bool { return b.store.SignalsQueued() == n+1 })
	release()
	r.wg.Wait()
	batches, _ := b.store.SignalCommits()
	// The three jammed, the rest at most in two (the flushers race for
	// them), and the repeat's second copy on its own.
	require.LessOrEqual(t, batches-before, uint64(6), "queued signals shared a statement")

	for i := range waiting {
		label := fmt.Sprint("go-", i)
		if i < 3 {
			label = fmt.Sprint("jam-", i)
		}
		res := r.results[label]
		require.Len(t, res, 1)
		require.NoError(t, res[0].err, label)
		require.True(t, res[0].fresh && res[0].resumed, "%s resumed its job", label)
	}
	rep := r.results["repeat"]
	require.Len(t, rep, 2)
	require.NoError(t, rep[0].err)
	require.NoError(t, rep[1].err)
	require.True(t, rep[0].fresh != rep[1].fresh, "one of the two copies is kept: %+v", rep)
	require.False(t, rep[0].resumed || rep[1].resumed, "the job waits for another name")
	var te *domain.TransitionError
	require.ErrorAs(t, r.results["finished"][0].err, &te)
	require.Equal(t, jobs.StateCompleted, te.From)
	require.True(t, errors.Is(r.results["missing"][0].err, domain.ErrNotFound))

	got := map[uuid.UUID]bool{}
	for _, c := range b.claim(t, "w2", 2*n, time.Minute) {
		require.False(t, got[c.ID], "claimed once")
		got[c.ID] = true
		require.Contains(t, c.Signals, "go")
	}
	require.Len(t, got, n, "every waiting job resumed once")
	require.Equal(t, 1, countSignals(t, b, waiting[0], "note"), "the repeated id is kept once")
}

// TestSignalRefusedAlone: a body the database refuses, delivered in one
// batch with good signals, fails only its own sender.
func TestSignalRefusedAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []uuid.UUID
	for range 12 {
		ids = append(ids, b.enqueue(t, jobs.EnqueueParams{Queue: "sig"}).ID)
	}
	r := &signalRig{b: b, results: map[string][]signalResult{}}
	release := r.jam(t, ids[0], ids[1], ids[2])
	for i := 3; i < len(ids); i++ {
		r.send(fmt.Sprint("ok-", i), ids[i], "note", "", `{"n": 1}`)
	}
	r.send("bad", ids[3], "other", "", `{not json`)
	waitUntil(t, "the signals to queue", func() bool { return b.store.SignalsQueued() == len(ids)-2 })
	release()
	r.wg.Wait()
	require.Error(t, r.results["bad"][0].err)
	require.Zero(t, countSignals(t, b, ids[3], "other"), "the refused body left nothing")
	for i := 3; i < len(ids); i++ {
		res := r.results[fmt.Sprint("ok-", i)]
		require.NoError(t, res[0].err)
		require.True(t, res[0].fresh, "kept for a job not waiting yet")
		require.Equal(t, 1, countSignals(t, b, ids[i], "note"))
	}
}

func countSignals(t *testing.T, b *testBundle, id uuid.UUID, name string) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM job_signals WHERE job_id = $1 AND name = $2`, id, name).Scan(&n))
	return n
}

// TestSignalFromAGoneCallerIsNotKept: a sender whose context has ended
// hears so, and its signal is not delivered.
func TestSignalFromAGoneCallerIsNotKept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "sig"})
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, _, err := b.store.SendSignal(ctx, j.ID, "go", "", []byte(`1`))
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, countSignals(t, b, j.ID, "go"))
}
