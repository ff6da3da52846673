package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestRecurringWithRacingSchedulers runs three scheduler processes against
// one one-second series, restarts them all half way, and checks the series
// kept exactly one pending occurrence and produced one occurrence per
// second on its grid, with no duplicates. Firings missed while no
// scheduler ran (during the restart) or while all were held up (a loaded
// machine) coalesce, by design, into the next one; a gap is allowed only
// where the occurrence after it was created once the skipped time had
// passed, never one a scheduler skipped while it still had time.
func TestRecurringWithRacingSchedulers(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	s := openStore(t, u)
	ctx := context.Background()
	res, err := s.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, IntervalSeconds: 1, Queue: "nobody-works-this"})
	require.NoError(t, err)
	series := *res[0].Job.ScheduleID

	pending := func() int { return dbtest.PendingOccurrences(t, s, series) }
	startAll := func() []*proc {
		var ps []*proc
		for range 3 {
			ps = append(ps, startFlint(t, "scheduler", u, "FLINT_PROMOTE_INTERVAL=100ms"))
		}
		for _, p := range ps {
			p.ready(t, 30*time.Second)
		}
		return ps
	}
	watch := func(d time.Duration) {
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			require.LessOrEqual(t, pending(), 1, "never two pending occurrences")
			time.Sleep(20 * time.Millisecond) // the sampling rate over the span watched
		}
	}
	ps := startAll()
	watch(4 * time.Second)
	for _, p := range ps {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, p.wait(t, 30*time.Second))
	}
	ps = startAll()
	watch(4 * time.Second)
	for _, p := range ps {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, p.wait(t, 30*time.Second))
	}
	require.Equal(t, 1, pending(), "the series is left with exactly one pending occurrence")

	rows, err := s.Pool().Query(ctx, `SELECT scheduled_for, created_at FROM jobs WHERE schedule_id = $1 ORDER BY scheduled_for`, series)
	require.NoError(t, err)
	var fires, created []time.Time
	for rows.Next() {
		var f, c time.Time
		require.NoError(t, rows.Scan(&f, &c))
		fires, created = append(fires, f), append(created, c)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(fires), 5, "the series kept firing")
	for i := 1; i < len(fires); i++ {
		d := fires[i].Sub(fires[i-1])
		require.Zero(t, d%time.Second, "occurrence %d is on the series' grid", i)
		require.GreaterOrEqual(t, d, time.Second, "occurrence %d: no duplicate", i)
		if d > time.Second {
			// A firing is skipped only when no scheduler got to create it
			// before its time: while none ran, or while all were held up
			// (a loaded machine). The occurrence after the gap was then
			// created once the skipped time had passed.
			missed := fires[i-1].Add(time.Second)
			require.False(t, created[i].Before(missed),
				"occurrence %d (%s) was created at %s, before %s, which it skipped", i, fires[i], created[i], missed)
		}
	}
}

// TestFanOutFanIn runs a diamond-shaped workflow (one root, five middle
// jobs, one sink) with a real worker pool and checks from the recorded
// execution timestamps that no job started before every job it depends on
// had finished.
func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	root := uuid.Must(uuid.NewV7())
	params := []jobs.EnqueueParams{{Type: jobs.TypeSleep, Payload: []byte(`{"ms":50}`), ID: root}}
	var middle []uuid.UUID
	for i := range 5 {
		id := uuid.Must(uuid.NewV7())
		middle = append(middle, id)
		params = append(params, jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(fmt.Sprintf(`{"ms":%d}`, 20+30*i)), ID: id, DependsOn: []uuid.UUID{root}})
	}
	sink := uuid.Must(uuid.NewV7())
	params = append(params, jobs.EnqueueParams{Type: jobs.TypeNoop, ID: sink, DependsOn: middle})
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)

	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	pool := workers.NewPool(workers.Config{WorkerID: "dag", Workers: 8, PollInterval: 20 * time.Millisecond}, store, reg, quietLogger())
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = pool.Run(runCtx); close(ran) }()
	defer func() { cancel(); <-ran }()
	js := []*jobs.Job{{ID: sink}}
	waitJobs(t, store, js, 60*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })

	run := func(id uuid.UUID) domain.Execution {
		j, err := store.GetJob(ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateCompleted, j.Status)
		ex, err := store.ListExecutions(ctx, j)
		require.NoError(t, err)
		require.Len(t, ex, 1)
		return ex[0]
	}
	rootRun := run(root)
	sinkRun := run(sink)
	for _, m := range middle {
		mr := run(m)
		require.False(t, mr.StartedAt.Before(*rootRun.FinishedAt), "a middle job started before the root finished")
		require.False(t, sinkRun.StartedAt.Before(*mr.FinishedAt), "the sink started before a middle job finished")
	}
}

// TestAgingBound keeps two workers saturated with high-priority jobs and
// enqueues one low-priority job: aging must get it running within the bound
// its settings imply, although high-priority work never runs out.
func TestAgingBound(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, err := store.UpdateSettings(ctx, map[string]json.RawMessage{
		"aging_low_after_seconds":    json.RawMessage(`1`),
		"aging_medium_after_seconds": json.RawMessage(`1`),
		"aging_step":                 json.RawMessage(`0.5`),
		"aging_interval_seconds":     json.RawMessage(`1`),
	}, "test")
	require.NoError(t, err)
	st, err := store.GetSettings(ctx)
	require.NoError(t, err)
	settings := &domain.SettingsHolder{}
	settings.Set(st)
	bound := st.AgingBound(jobs.PriorityLow)
	require.Equal(t, 6*time.Second, bound, "1 s threshold + 4 steps of 0.5 + 1 cycle of slack")

	// A feeder keeps far more high-priority work queued than two workers run.
	feed := func(n int) {
		ps := make([]jobs.EnqueueParams, n)
		for i := range ps {
			ps[i] = jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms":40}`), Priority: jobs.PriorityHigh}
		}
		_, err := store.Enqueue(ctx, ps...)
		require.NoError(t, err)
	}
	feed(200)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				ps := make([]jobs.EnqueueParams, 10)
				for i := range ps {
					ps[i] = jobs.EnqueueParams{Type: jobs.TypeSleep, Payload: []byte(`{"ms":40}`), Priority: jobs.PriorityHigh}
				}
				_, _ = store.Enqueue(ctx, ps...)
			}
		}
	}()
	low, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Priority: jobs.PriorityLow})
	require.NoError(t, err)
	enqueued := time.Now()

	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	pool := workers.NewPool(workers.Config{WorkerID: "aging", Workers: 2}, store, reg, quietLogger())
	go func() { _ = pool.Run(ctx) }()
	ager := scheduler.NewAger(scheduler.AgerConfig{Holder: "t", Tick: 100 * time.Millisecond}, store, settings, quietLogger())
	go func() { _ = ager.Run(ctx) }()

	got := waitJobs(t, store, []*jobs.Job{low[0].Job}, bound+10*time.Second, func(j *jobs.Job) bool { return j.StartedAt != nil })[0]
	waited := got.StartedAt.Sub(enqueued)
	require.LessOrEqual(t, waited, bound+2*time.Second, "low-priority job waited %s; the bound is %s", waited, bound)
	var queuedHigh int
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE status = 'queued' AND priority = 1`).Scan(&queuedHigh))
	require.Greater(t, queuedHigh, 0, "high-priority work was still waiting when the low job started")
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
