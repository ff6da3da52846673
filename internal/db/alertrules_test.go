package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// notices records what an evaluation asked to send, one email per notice.
type notices struct {
	mu  sync.Mutex
	got []domain.AlertNotice
}

func (n *notices) render(a domain.AlertNotice) ([]domain.Notification, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, a)
	return []domain.Notification{{Channel: domain.ChannelEmail, Email: domain.Email{
		To: []string{"ops@example.test"}, Subject: string(a.Event) + " " + a.Alert.Subject, Text: a.Alert.Message}}}, nil
}

func (n *notices) take() []domain.AlertNotice {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.got
	n.got = nil
	return out
}

// evaluate runs one evaluation that is due whatever the last one was.
func evaluate(t *testing.T, store *db.Store, n *notices) []domain.AlertNotice {
	t.Helper()
	_, err := store.Pool().Exec(context.Background(), `UPDATE loop_leases SET last_run_at = '-infinity' WHERE name = 'alert_rules'`)
	require.NoError(t, err)
	ok, _, err := store.EvaluateAlertRules(context.Background(), time.Minute, n.render)
	require.NoError(t, err)
	require.True(t, ok)
	return n.take()
}

// runJobs enqueues and runs n jobs of typ in queue, failing the first
// failed of them for good.
func runJobs(t *testing.T, store *db.Store, typ, queue string, n, failed int) {
	t.Helper()
	ctx := context.Background()
	params := make([]jobs.EnqueueParams, n)
	zero := 0
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: typ, Queue: queue, MaxRetries: &zero}
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: n, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	batch := make([]domain.Finish, n)
	for i, j := range claimed {
		batch[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded}
		if i < failed {
			batch[i].Outcome, batch[i].Error = domain.OutcomeFailed, "boom"
		}
	}
	_, _, err = store.FinishJobs(ctx, batch)
	require.NoError(t, err)
}

func TestAlertRuleFailureRateFiresRepeatsAndResolves(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	rule := domain.NewAlertRule(domain.AlertFailureRate)
	rule.Name, rule.Threshold, rule.MinRuns, rule.CooldownSeconds = "reports failing", 0.25, 8, 60
	require.NoError(t, rule.Validate())
	rule, err := store.CreateAlertRule(ctx, rule)
	require.NoError(t, err)
	var n notices

	// Under the minimum number of runs nothing fires, however bad.
	runJobs(t, store, "report", "q1", 4, 4)
	require.Empty(t, evaluate(t, store, &n))

	// 4 of 10 runs failed (40% > 25%) for report; mail ran clean.
	runJobs(t, store, "report", "q1", 6, 0)
	runJobs(t, store, "mail", "q2", 20, 1)
	got := evaluate(t, store, &n)
	require.Len(t, got, 1)
	require.Equal(t, domain.AlertFiring, got[0].Event)
	require.Equal(t, "report", got[0].Alert.Subject)
	require.InDelta(t, 0.4, got[0].Alert.Value, 1e-9)
	require.Contains(t, got[0].Alert.Message, "4 of 10 runs failed (40%)")

	// It holds still: no second notification inside the cooldown.
	require.Empty(t, evaluate(t, store, &n))
	firing, err := store.ListAlerts(ctx, domain.AlertQuery{Status: "firing"})
	require.NoError(t, err)
	require.Len(t, firing, 1)
	require.Equal(t, "reports failing", firing[0].RuleName)

	// After the cooldown it repeats, once.
	_, err = store.Pool().Exec(ctx, `UPDATE alerts SET last_notified_at = last_notified_at - interval '61 seconds'`)
	require.NoError(t, err)
	got = evaluate(t, store, &n)
	require.Len(t, got, 1)
	require.Equal(t, domain.AlertRepeat, got[0].Event)
	require.Equal(t, 2, got[0].Alert.Notifications)
	require.Empty(t, evaluate(t, store, &n))

	// Enough clean runs bring the rate under the threshold: resolved, once.
	runJobs(t, store, "report", "q1", 10, 0)
	got = evaluate(t, store, &n)
	require.Len(t, got, 1)
	require.Equal(t, domain.AlertResolved, got[0].Event)
	require.NotNil(t, got[0].Alert.ResolvedAt)
	require.Empty(t, evaluate(t, store, &n))
	firing, err = store.ListAlerts(ctx, domain.AlertQuery{Status: "firing"})
	require.NoError(t, err)
	require.Empty(t, firing)
	resolved, err := store.ListAlerts(ctx, domain.AlertQuery{Status: "resolved"})
	require.NoError(t, err)
	require.Len(t, resolved, 1)

	// Every notification went to the outbox, tied to its alert.
	out, err := store.AlertOutbox(ctx, 10)
	require.NoError(t, err)
	require.Len(t, out, 3)
	for _, o := range out {
		require.Equal(t, domain.ChannelEmail, o.Channel)
		require.NotNil(t, o.AlertID)
		require.Equal(t, resolved[0].ID, *o.AlertID)
	}
}

func TestAlertRuleQueueLatencyAndNoWorker(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	latency := domain.NewAlertRule(domain.AlertQueueLatency)
	latency.Name, latency.Queue, latency.Threshold = "slow imports", "imports", 120
	require.NoError(t, latency.Validate())
	_, err := store.CreateAlertRule(ctx, latency)
	require.NoError(t, err)
	orphan := domain.NewAlertRule(domain.AlertNoWorker)
	orphan.Name, orphan.GraceSeconds = "nobody home", 60
	require.NoError(t, orphan.Validate())
	_, err = store.CreateAlertRule(ctx, orphan)
	require.NoError(t, err)
	var n notices

	for _, q := range []string{"imports", "exports"} {
		_, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: q})
		require.NoError(t, err)
	}
	require.Empty(t, evaluate(t, store, &n), "fresh jobs are neither late nor orphaned")

	// The jobs have waited five minutes; a live worker serves exports only.
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() - interval '5 minutes'`)
	require.NoError(t, err)
	require.NoError(t, store.RegisterWorker(ctx, domain.WorkerInfo{ID: "w-exports", Host: "h", PID: 1, Queues: []string{"exports"},
		Concurrency: 1, Version: "test", StartedAt: time.Now()}, time.Minute))
	got := evaluate(t, store, &n)
	subjects := map[string]domain.AlertEvent{}
	for _, a := range got {
		subjects[a.Rule.Name+"/"+a.Alert.Subject] = a.Event
	}
	require.Equal(t, map[string]domain.AlertEvent{
		"slow imports/imports": domain.AlertFiring, // exports is late too, but the rule watches imports
		"nobody home/imports":  domain.AlertFiring, // exports has a worker
	}, subjects)

	// A worker for every queue resolves the orphan alert; the latency one holds.
	require.NoError(t, store.RegisterWorker(ctx, domain.WorkerInfo{ID: "w-all", Host: "h", PID: 2, Concurrency: 1, Version: "test",
		StartedAt: time.Now()}, time.Minute))
	got = evaluate(t, store, &n)
	require.Len(t, got, 1)
	require.Equal(t, "nobody home", got[0].Rule.Name)
	require.Equal(t, domain.AlertResolved, got[0].Event)
}

func TestAlertRuleCronOverdue(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "nightly", IntervalSeconds: 3600})
	require.NoError(t, err)
	series := *res[0].Job.ScheduleID
	rule := domain.NewAlertRule(domain.AlertCronOverdue)
	rule.Name, rule.GraceSeconds = "missed cron", 300
	require.NoError(t, rule.Validate())
	_, err = store.CreateAlertRule(ctx, rule)
	require.NoError(t, err)
	var n notices
	require.Empty(t, evaluate(t, store, &n))

	// No scheduler released the occurrence: it is ten minutes overdue.
	_, err = store.Pool().Exec(ctx, `UPDATE job_schedules SET next_run_at = now() - interval '10 minutes' WHERE id = $1`, series)
	require.NoError(t, err)
	got := evaluate(t, store, &n)
	require.Len(t, got, 1)
	require.Equal(t, series.String(), got[0].Alert.Subject)
	require.Contains(t, got[0].Alert.Message, "10 minutes overdue")

	// Paused series are not overdue.
	_, _, err = store.PauseSchedule(ctx, series)
	require.NoError(t, err)
	got = evaluate(t, store, &n)
	require.Len(t, got, 1)
	require.Equal(t, domain.AlertResolved, got[0].Event)
}

// TestAlertRulesEvaluateOncePerInterval: many processes asking at once
// evaluate once, and notify once.
func TestAlertRulesEvaluateOncePerInterval(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	rule := domain.NewAlertRule(domain.AlertQueueLatency)
	rule.Name, rule.Threshold = "late", 1
	require.NoError(t, rule.Validate())
	_, err := store.CreateAlertRule(ctx, rule)
	require.NoError(t, err)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
	require.NoError(t, err)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() - interval '1 hour'`)
	require.NoError(t, err)

	var n notices
	var wg sync.WaitGroup
	evaluations := make(chan bool, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, _, err := store.EvaluateAlertRules(ctx, time.Hour, n.render)
			if err != nil {
				panic(fmt.Sprint(err))
			}
			evaluations <- ok
		}()
	}
	wg.Wait()
	close(evaluations)
	count := 0
	for ok := range evaluations {
		if ok {
			count++
		}
	}
	require.Equal(t, 1, count)
	require.Len(t, n.take(), 1)
	out, err := store.AlertOutbox(ctx, 10)
	require.NoError(t, err)
	require.Len(t, out, 1)
}

// TestAlertRuleDisableClosesAlerts: a disabled rule's open alerts close
// quietly, and the rule no longer fires.
func TestAlertRuleDisableClosesAlerts(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	rule := domain.NewAlertRule(domain.AlertQueueLatency)
	rule.Name, rule.Threshold = "late", 1
	require.NoError(t, rule.Validate())
	rule, err := store.CreateAlertRule(ctx, rule)
	require.NoError(t, err)
	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
	require.NoError(t, err)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() - interval '1 hour'`)
	require.NoError(t, err)
	var n notices
	require.Len(t, evaluate(t, store, &n), 1)

	off := rule
	off.Enabled = false
	_, err = store.UpdateAlertRule(ctx, rule, off)
	require.NoError(t, err)
	require.Empty(t, evaluate(t, store, &n))
	firing, err := store.ListAlerts(ctx, domain.AlertQuery{Status: "firing"})
	require.NoError(t, err)
	require.Empty(t, firing)

	require.NoError(t, store.DeleteAlertRule(ctx, rule.ID))
	_, err = store.GetAlertRule(ctx, rule.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)
	all, err := store.ListAlerts(ctx, domain.AlertQuery{})
	require.NoError(t, err)
	require.Empty(t, all)
}
