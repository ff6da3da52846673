package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// ledgerCounts reads the example's ledger: how many times each step
// function ran, per job id.
func ledgerCounts(t *testing.T, path string) map[string]map[string]int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]map[string]int{}
	}
	require.NoError(t, err)
	out := map[string]map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		what, id, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if out[what] == nil {
			out[what] = map[string]int{}
		}
		out[what][id]++
	}
	return out
}

// TestStepsSurviveSIGKILL: a worker process is killed with SIGKILL while
// every one of its slots is inside step 2 (invoice) of an order's three
// steps. Another worker finishes all 1,000 orders, and the ledger the
// step functions write outside Flint shows each card charged exactly
// once: the killed jobs resumed at step 2 with step 1's recorded result.
func TestStepsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	bin := exampleProgram(t, "durable")
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	ledger := filepath.Join(t.TempDir(), "ledger")
	const slots, total = 50, 1000
	victim := startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=victim", "FLINT_WORKERS=50",
		"DURABLE_LEDGER="+ledger, "DURABLE_HOLD_INVOICE=1")
	js := enqueueAll(t, s, orderParams(total)...)
	waitFor(t, 2*time.Minute, "every slot of the victim to be inside step 2", func() bool {
		return len(ledgerCounts(t, ledger)["invoice"]) == slots
	})
	require.NoError(t, victim.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, victim.wait(t, 10*time.Second), "killed, not exited cleanly")
	held := ledgerCounts(t, ledger)
	require.Len(t, held["charge"], slots, "no job was between steps when the worker died")

	startBinary(t, bin, "scheduler", u)
	startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=rescuer", "FLINT_WORKERS=16", "DURABLE_LEDGER="+ledger)
	done := waitJobs(t, s, js, 4*time.Minute, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	counts := ledgerCounts(t, ledger)
	require.Len(t, counts["charge"], total)
	for id, n := range counts["charge"] {
		require.Equal(t, 1, n, "job %s: the card was charged %d times", id, n)
	}
	// The jobs held inside step 2 were interrupted and ran step 2 again;
	// the victim may also have had jobs claimed into its buffer, not yet
	// started, which are interrupted too (a start the pool had not yet
	// recorded looks the same) but ran no step before the kill.
	for _, j := range done {
		id := j.ID.String()
		if held["invoice"][id] > 0 {
			require.Equal(t, 1, j.Interruptions, "job %s was held in step 2 when the worker died", id)
			require.Equal(t, 2, counts["invoice"][id], "the interrupted step ran again")
		} else {
			require.Equal(t, 1, counts["invoice"][id], "job %s ran step 2 once", id)
		}
		var res map[string]any
		require.NoError(t, json.Unmarshal(j.Result, &res))
		require.Equal(t, true, res["emailed"])
	}
}

// orderParams are n orders for the example's "order" type.
func orderParams(n int) []jobs.EnqueueParams {
	out := make([]jobs.EnqueueParams, n)
	for i := range out {
		p, _ := json.Marshal(map[string]any{"order_id": fmt.Sprintf("o-%d", i), "amount_cents": 100 + i, "email": "c@example.com"})
		out[i] = jobs.EnqueueParams{Type: "order", Payload: p}
	}
	return out
}

// TestSleepAcrossSchedulerRestart: a job sleeps while the only scheduler
// is killed; a new scheduler, started after the wake time has passed,
// wakes it from the database alone, and it completes after its step.
func TestSleepAcrossSchedulerRestart(t *testing.T) {
	t.Parallel()
	bin := exampleProgram(t, "durable")
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	sched := startBinary(t, bin, "scheduler", u)
	startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=sleeper")
	js := enqueueAll(t, s, jobs.EnqueueParams{Type: "reminder", Payload: json.RawMessage(`{"order_id": "1042", "after_seconds": 2}`)})
	w := waitJobs(t, s, js, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateWaiting })[0]
	require.Equal(t, jobs.WaitSleep, w.WaitingFor.Kind)
	require.NoError(t, sched.cmd.Process.Signal(syscall.SIGKILL))
	require.Error(t, sched.wait(t, 10*time.Second))
	waitFor(t, 30*time.Second, "the wake time to pass with no scheduler", func() bool { return time.Now().After(w.WaitingFor.Until.Add(time.Second)) })
	require.Equal(t, jobs.StateWaiting, waitJobs(t, s, js, time.Second, func(*jobs.Job) bool { return true })[0].Status,
		"no scheduler, no wake")

	startBinary(t, bin, "scheduler", u)
	done := waitJobs(t, s, js, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })[0]
	require.JSONEq(t, `"reminded about 1042"`, string(done.Result))
	require.Equal(t, 1, done.Attempt, "the sleep charged no attempt")
	require.False(t, done.FinishedAt.Before(w.WaitingFor.Until), "not woken before its time")
}
