package db_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// explain is what GET /api/v1/jobs/{id}/explain answers, from real rows.
func (b *testBundle) explain(t *testing.T, id uuid.UUID) domain.Explanation {
	t.Helper()
	f, err := b.store.ExplainFacts(b.ctx, id)
	require.NoError(t, err)
	return domain.Explain(f)
}

func codes(e domain.Explanation) []string {
	var out []string
	for _, r := range e.Reasons {
		out = append(out, r.Code)
	}
	return out
}

func reason(t *testing.T, e domain.Explanation, code string) domain.Reason {
	t.Helper()
	for _, r := range e.Reasons {
		if r.Code == code {
			return r
		}
	}
	t.Fatalf("no %s reason in %+v", code, e.Reasons)
	return domain.Reason{}
}

func (b *testBundle) finish(t *testing.T, j *jobs.Job, f domain.Finish) {
	t.Helper()
	f.Lease = domain.LeaseOf(j)
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{f})
	require.NoError(t, err)
	require.NotEmpty(t, moved[0].Status, "lease held")
}

func TestExplainWaitingJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Waiting for its run time.
	later := b.enqueue(t, jobs.EnqueueParams{Delay: time.Hour})
	e := b.explain(t, later.ID)
	require.Equal(t, []string{"waiting_for_run_at"}, codes(e))
	require.True(t, reason(t, e, "waiting_for_run_at").At.Equal(later.RunAt))
	require.Contains(t, e.Summary, "(in 1h0m0s)")

	// Blocked on a dependency that is still queued, in another queue.
	parent := b.enqueue(t, jobs.EnqueueParams{Queue: "elsewhere"})
	child := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{parent.ID}})
	e = b.explain(t, child.ID)
	r := reason(t, e, "blocked")
	require.Equal(t, []uuid.UUID{parent.ID}, r.Jobs)
	require.Contains(t, r.Message, "Waiting for 1 of 1 dependencies")
	require.Contains(t, r.Message, domain.ShortID(parent.ID)+" (noop) is queued")

	// Queued behind others in claim order, with no worker alive at all.
	for range 5 {
		b.enqueue(t, jobs.EnqueueParams{Queue: "q", Priority: jobs.PriorityHigh})
	}
	target := b.enqueue(t, jobs.EnqueueParams{Queue: "q", Priority: jobs.PriorityMedium})
	b.enqueue(t, jobs.EnqueueParams{Queue: "q", Priority: jobs.PriorityLow})
	b.enqueue(t, jobs.EnqueueParams{Queue: "other", Priority: jobs.PriorityHigh})
	e = b.explain(t, target.ID)
	require.Equal(t, []string{"no_live_worker", "queue_position"}, codes(e))
	pos := reason(t, e, "queue_position")
	require.True(t, pos.Approximate)
	require.Contains(t, pos.Message, "behind about 5 jobs")

	// A worker alive, but for other queues only; then one for every queue.
	require.NoError(t, b.store.RegisterWorker(b.ctx, domain.WorkerInfo{ID: "w-mail", Queues: []string{"mail", "reports"},
		Concurrency: 4, StartedAt: time.Now()}, time.Minute))
	e = b.explain(t, target.ID)
	require.Equal(t, []string{"no_worker_for_queue", "queue_position"}, codes(e))
	require.Contains(t, e.Summary, `queue "q"`)
	require.Contains(t, e.Summary, "mail, reports")
	require.NoError(t, b.store.RegisterWorker(b.ctx, domain.WorkerInfo{ID: "w-all", Concurrency: 4, StartedAt: time.Now()}, time.Minute))
	e = b.explain(t, target.ID)
	require.Equal(t, []string{"queue_position"}, codes(e))

	// The first in its queue is next.
	first := b.claimFirstOf(t, "q")
	_ = first
	e = b.explain(t, target.ID)
	require.Contains(t, reason(t, e, "queue_position").Message, "behind about 4 jobs")
}

// A job is ready but waits for a worker: due and not yet moved to its
// queue, or queued and next in line.
func TestExplainDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "due", Delay: time.Hour})
	_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET run_at = now() - interval '90 seconds' WHERE id = $1`, j.ID)
	require.NoError(t, err)
	e := b.explain(t, j.ID)
	require.Equal(t, []string{"due"}, codes(e))
	require.True(t, strings.HasPrefix(e.Summary, "Due since "), e.Summary)
	require.Contains(t, e.Summary, "the scheduler moves it to its queue within moments")
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.True(t, reason(t, e, "due").At.Equal(got.RunAt))

	// Promoted: queued, first in line, a worker alive for its queue.
	require.NoError(t, b.store.RegisterWorker(b.ctx, domain.WorkerInfo{ID: "w-due", Queues: []string{"due"},
		Types: []string{jobs.TypeNoop}, Concurrency: 1, StartedAt: time.Now()}, time.Minute))
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE jobs SET status = 'queued' WHERE id = $1`, j.ID)
	require.NoError(t, err)
	e = b.explain(t, j.ID)
	require.Equal(t, []string{"queue_position"}, codes(e))
	require.Contains(t, e.Summary, `Queued in "due" and next in claim order: the next free worker serving it takes it.`)
}

// Whether a live worker can run a job's type comes from what the workers
// registered in the database, not from the process that answers: workers
// claim by queue, so one without the handler claims the job and fails the
// attempt, which is retried.
func TestExplainNoWorkerForType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	two := 2
	j := b.enqueue(t, jobs.EnqueueParams{Type: "report.build", Queue: "reports", MaxRetries: &two})
	later := b.enqueue(t, jobs.EnqueueParams{Type: "report.build", Queue: "reports", Delay: time.Hour})
	register := func(id string, queues, types []string) {
		require.NoError(t, b.store.RegisterWorker(b.ctx, domain.WorkerInfo{ID: id, Queues: queues, Types: types,
			Concurrency: 2, StartedAt: time.Now()}, time.Minute))
	}

	// No worker at all: nothing to say about the type.
	require.Equal(t, []string{"no_live_worker", "queue_position"}, codes(b.explain(t, j.ID)))

	// Workers serve the queue, none with the handler; one that has it
	// serves other queues only.
	register("w-basic", nil, []string{jobs.TypeNoop, jobs.TypeSleep})
	register("w-elsewhere", []string{"mail"}, []string{jobs.TypeNoop, "report.build"})
	workers, err := b.store.ListWorkers(b.ctx, time.Minute)
	require.NoError(t, err)
	require.Len(t, workers, 2)
	require.Equal(t, []string{jobs.TypeNoop, jobs.TypeSleep}, workers[0].Types, "the types are stored")
	e := b.explain(t, j.ID)
	require.Equal(t, []string{"no_worker_for_type", "queue_position"}, codes(e))
	require.Equal(t, `No live worker serving queue "reports" runs type "report.build" (the worker serving it handles only noop, sleep). `+
		`Workers take only the types they have handlers for, so it waits until a worker that runs "report.build" starts: `+
		`a program of your own with its handler, or a remote worker that registers it.`, e.Summary)
	require.NotContains(t, e.Summary, "at once")
	require.Equal(t, []string{"waiting_for_run_at", "no_worker_for_type"}, codes(b.explain(t, later.ID)))

	// A worker that reports no types (an older build) may run any.
	register("w-old", []string{"reports"}, nil)
	require.Equal(t, []string{"queue_position"}, codes(b.explain(t, j.ID)))
	_, err = b.store.Pool().Exec(b.ctx, `DELETE FROM workers WHERE id = 'w-old'`)
	require.NoError(t, err)
	require.Contains(t, codes(b.explain(t, j.ID)), "no_worker_for_type")

	// One with the handler starts serving the queue; then it dies (its
	// heartbeat stops) and the reason is back.
	register("w-reports", []string{"reports"}, []string{"report.build"})
	require.Equal(t, []string{"queue_position"}, codes(b.explain(t, j.ID)))
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE workers SET heartbeat_at = now() - interval '1 minute' WHERE id = 'w-reports'`)
	require.NoError(t, err)
	require.Equal(t, []string{"no_worker_for_type", "queue_position"}, codes(b.explain(t, j.ID)))
}

// claimFirstOf claims the next job of queue q.
func (b *testBundle) claimFirstOf(t *testing.T, q string) *jobs.Job {
	t.Helper()
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w-all", Limit: 1, LeaseTTL: time.Minute, Queues: []string{q}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

func TestExplainRunningAndRetrying(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "r"})
	c := b.claimFirstOf(t, "r")
	require.Equal(t, j.ID, c.ID)
	e := b.explain(t, j.ID)
	require.Equal(t, []string{"running"}, codes(e))
	require.Contains(t, e.Summary, "Running on worker w-all")
	require.Contains(t, e.Summary, "attempt 1 of 4")
	require.Contains(t, e.Summary, "Its lease runs until")

	_, err := b.store.CancelJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Contains(t, codes(b.explain(t, j.ID)), "cancel_requested")

	// A failed attempt waits out its backoff.
	k := b.enqueue(t, jobs.EnqueueParams{Queue: "s"})
	kc := b.claimFirstOf(t, "s")
	b.finish(t, kc, domain.Finish{Outcome: domain.OutcomeFailed, Error: "upstream said <503>", RetryDelay: time.Hour})
	e = b.explain(t, k.ID)
	r := reason(t, e, "retry_backoff")
	require.Contains(t, r.Message, "Attempt 1 of 4 failed; retry 2 runs at")
	require.Contains(t, r.Message, "upstream said <503>")

	// A lease that ran out: the worker is gone.
	l := b.enqueue(t, jobs.EnqueueParams{Queue: "t"})
	got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w-gone", Limit: 1, LeaseTTL: 10 * time.Millisecond, Queues: []string{"t"}})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Eventually(t, func() bool { // by the database's clock, which explain reads
		var expired bool
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT lease_expires_at < now() FROM jobs WHERE id = $1`, l.ID).Scan(&expired))
		return expired
	}, 5*time.Second, 5*time.Millisecond)
	e = b.explain(t, l.ID)
	require.Equal(t, []string{"running", "lease_expired"}, codes(e))
	require.Contains(t, reason(t, e, "lease_expired").Message, "the reaper will queue the job again")

	// Reaped: queued again, and the lost worker is counted.
	moved, err := b.store.ReapExpired(b.ctx, nil, 10)
	require.NoError(t, err)
	require.Len(t, moved, 1)
	e = b.explain(t, l.ID)
	require.Equal(t, []string{"no_live_worker", "queue_position", "interrupted"}, codes(e))
	require.Contains(t, reason(t, e, "interrupted").Message, "Its worker was lost once (lease expired); after 3 it goes")
}

func TestExplainFinishedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0

	done := b.enqueue(t, jobs.EnqueueParams{Queue: "a"})
	b.finish(t, b.claimFirstOf(t, "a"), domain.Finish{Outcome: domain.OutcomeSucceeded})
	e := b.explain(t, done.ID)
	require.Equal(t, []string{"completed"}, codes(e))
	require.Contains(t, e.Summary, "on attempt 1 of 4")

	dead := b.enqueue(t, jobs.EnqueueParams{Queue: "b", MaxRetries: &zero})
	b.finish(t, b.claimFirstOf(t, "b"), domain.Finish{Outcome: domain.OutcomeFailed, Error: "boom"})
	e = b.explain(t, dead.ID)
	require.Equal(t, []string{"dead_letter"}, codes(e))
	require.Contains(t, e.Summary, "after 1 of 1 attempts. Last error: boom")

	perm := b.enqueue(t, jobs.EnqueueParams{Queue: "c"})
	b.finish(t, b.claimFirstOf(t, "c"), domain.Finish{Outcome: domain.OutcomeFailed, Error: "bad payload", Final: true})
	require.Contains(t, b.explain(t, perm.ID).Summary, "the handler said no retry could succeed")

	// Cancelled because what it waited for failed for good.
	root := b.enqueue(t, jobs.EnqueueParams{Queue: "d", MaxRetries: &zero})
	leaf := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{root.ID}})
	b.finish(t, b.claimFirstOf(t, "d"), domain.Finish{Outcome: domain.OutcomeFailed, Error: "no"})
	e = b.explain(t, leaf.ID)
	r := reason(t, e, "cancelled_by_dependency")
	require.Equal(t, []uuid.UUID{root.ID}, r.Jobs)
	require.Contains(t, r.Message, "is dead_letter and will not complete")

	// Cancelled by an operator, as the audit trail records.
	op := b.enqueue(t, jobs.EnqueueParams{Queue: "e"})
	_, err := b.store.CancelJob(b.ctx, op.ID)
	require.NoError(t, err)
	require.NoError(t, b.store.RecordAudit(b.ctx, domain.AuditEntry{Actor: "ops@example.com@10.0.0.1", Source: "dashboard",
		Action: "cancel", Details: json.RawMessage(`{}`)}, op.ID))
	e = b.explain(t, op.ID)
	require.Equal(t, []string{"cancelled_by_operator"}, codes(e))
	require.True(t, strings.HasPrefix(e.Summary, "Cancelled by ops@example.com@10.0.0.1 (dashboard) at "), e.Summary)

	// In the bin.
	_, err = b.store.DeleteJob(b.ctx, done.ID)
	require.NoError(t, err)
	e = b.explain(t, done.ID)
	require.Equal(t, []string{"in_bin"}, codes(e))
	require.Contains(t, e.Summary, "(it was completed)")

	_, err = b.store.ExplainFacts(b.ctx, uuid.New())
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// A cancelled job says who or what cancelled it: its handler, an operator
// (named when the audit trail has the action), its recurring series.
func TestExplainCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// Its handler gave up on it.
	h := b.enqueue(t, jobs.EnqueueParams{Queue: "h"})
	b.finish(t, b.claimFirstOf(t, "h"), domain.Finish{Outcome: domain.OutcomeCancelled, Error: "the customer closed the account"})
	e := b.explain(t, h.ID)
	require.Equal(t, []string{"cancelled"}, codes(e))
	require.Contains(t, e.Summary, "by its handler, in attempt 1: the customer closed the account.")

	// An operator cancelled it while it waited out a retry; the audit
	// entry was not written, and the failed attempt's error is not the
	// handler cancelling it.
	w := b.enqueue(t, jobs.EnqueueParams{Queue: "w"})
	b.finish(t, b.claimFirstOf(t, "w"), domain.Finish{Outcome: domain.OutcomeFailed, Error: "upstream said 503", RetryDelay: time.Hour})
	_, err := b.store.CancelJob(b.ctx, w.ID)
	require.NoError(t, err)
	e = b.explain(t, w.ID)
	require.Equal(t, []string{"cancelled"}, codes(e))
	require.Contains(t, e.Summary, "while it waited for attempt 2 of 4 (the audit trail does not say by whom).")
	require.NotContains(t, e.Summary, "handler")
	require.NoError(t, b.store.RecordAudit(b.ctx, domain.AuditEntry{Actor: "key:billing", Source: "api", Action: domain.AuditCancel}, w.ID))
	e = b.explain(t, w.ID)
	require.Equal(t, []string{"cancelled_by_operator"}, codes(e))
	require.True(t, strings.HasPrefix(e.Summary, "Cancelled by key:billing (api) at "), e.Summary)

	// Never ran: cancelled while it waited for its time.
	n := b.enqueue(t, jobs.EnqueueParams{Queue: "n", Delay: time.Hour})
	_, err = b.store.CancelJob(b.ctx, n.ID)
	require.NoError(t, err)
	require.Contains(t, b.explain(t, n.ID).Summary, "before it ever ran (the audit trail does not say by whom).")

	// A cancel requested while it ran; its worker stopped the handler.
	r := b.enqueue(t, jobs.EnqueueParams{Queue: "r"})
	rc := b.claimFirstOf(t, "r")
	_, err = b.store.CancelJob(b.ctx, r.ID)
	require.NoError(t, err)
	b.finish(t, rc, domain.Finish{Outcome: domain.OutcomeCancelled, Error: "cancelled while running: context canceled"})
	e = b.explain(t, r.ID)
	require.Equal(t, []string{"cancelled"}, codes(e))
	require.Contains(t, e.Summary, "a cancel was requested while attempt 1 ran, and its worker stopped it")

	// Its recurring series was paused: the occurrence says so, not that a
	// handler cancelled it, also without an audit entry.
	first := b.enqueue(t, jobs.EnqueueParams{Queue: "s", IntervalSeconds: 3600, Delay: time.Hour})
	_, cancelled, err := b.store.PauseSchedule(b.ctx, *first.ScheduleID)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{first.ID}, cancelled)
	e = b.explain(t, first.ID)
	require.Equal(t, []string{"cancelled_by_series"}, codes(e))
	require.Contains(t, e.Summary, "when its recurring series was paused; this occurrence never ran.")
	require.NotContains(t, e.Summary, "handler")
	require.NoError(t, b.store.RecordAudit(b.ctx, domain.AuditEntry{Actor: "ops@example.com", Source: "dashboard",
		Action: domain.AuditSeriesPause, Details: json.RawMessage(`{"series":"` + first.ScheduleID.String() + `"}`)}, cancelled...))
	require.Contains(t, b.explain(t, first.ID).Summary, "when its recurring series was paused by ops@example.com (dashboard);")

	// Deleted: the occurrence is unlinked from the series, and still says so.
	_, err = b.store.ResumeSchedule(b.ctx, *first.ScheduleID)
	require.NoError(t, err)
	var next uuid.UUID
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM jobs WHERE schedule_id = $1 AND status = 'scheduled'`,
		*first.ScheduleID).Scan(&next))
	cancelled, err = b.store.DeleteSchedule(b.ctx, *first.ScheduleID)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{next}, cancelled)
	e = b.explain(t, next)
	require.Equal(t, []string{"cancelled_by_series"}, codes(e))
	require.Contains(t, e.Summary, "when its recurring series was deleted; this occurrence never ran.")
	require.NoError(t, b.store.RecordAudit(b.ctx, domain.AuditEntry{Actor: "key:deploy", Source: "api", Action: domain.AuditSeriesDelete}, next))
	require.Contains(t, b.explain(t, next).Summary, "when its recurring series was deleted by key:deploy (api);")
}

// TestExplainPushQueue: a push queue's waiting job says where it goes and
// what holds the queue's pushes back, and needs no worker with a handler.
func TestExplainPushQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.UpdateQueue(b.ctx, "hooks", "test", func(q domain.QueueSettings) domain.QueueSettings {
		return domain.QueuePatch{SetPush: true, Push: &domain.PushConfig{URL: "https://hooks.example.com/jobs?token=x", TimeoutSeconds: 30}}.Apply(q)
	})
	require.NoError(t, err)
	require.NoError(t, b.store.RegisterWorker(b.ctx, domain.WorkerInfo{ID: "w", Types: []string{"noop"}, Concurrency: 1, StartedAt: time.Now()}, time.Minute))
	j := b.enqueue(t, jobs.EnqueueParams{Type: "py.anything", Queue: "hooks"})
	e := b.explain(t, j.ID)
	require.Equal(t, []string{"push_queue", "queue_position"}, codes(e))
	require.Contains(t, e.Summary, "https://hooks.example.com/…")
	require.NotContains(t, e.Summary, "token")
	require.NoError(t, b.store.HoldPush(b.ctx, "hooks", time.Now().Add(time.Minute)))
	require.Equal(t, []string{"push_held", "queue_position"}, codes(b.explain(t, j.ID)))
	require.NoError(t, b.store.PausePush(b.ctx, "hooks", "410 Gone"))
	require.Equal(t, []string{"push_paused", "queue_position"}, codes(b.explain(t, j.ID)))
}
