package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/syncbuf"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// A handler's progress reaches the database while it runs, through the
// heartbeat, and what it logs is stored with the job and attempt,
// scrubbed, capped per attempt, and merged with Flint's lifecycle lines.
func TestHandlerProgressAndLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	var once sync.Once
	b.registry.Register("reporter", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		log := jobs.Logger(ctx)
		log.Info("connecting to postgres://app:hunter2@db.internal/app", "token", "s3cret-value", "rows", 42)
		log.With("step", "copy").WithGroup("batch").Warn("slow batch", "n", 7)
		jobs.ReportProgress(ctx, 40, "copied 400 of 1000 rows")
		<-release
		for i := range domain.MaxJobLogLines + 5 {
			log.Info(fmt.Sprintf("line %d", i))
		}
		jobs.ReportProgress(ctx, 150, "done") // clamped
		return nil, nil
	}))
	j := b.enqueue(t, "reporter", `{}`)
	b.start(t, workers.Config{Workers: 2, HeartbeatInterval: time.Hour, LeaseTTL: time.Hour})
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // runs before the pool's stop

	// Progress arrives within about a second although the heartbeat
	// interval is an hour: a report brings the heartbeat forward.
	require.Eventually(t, func() bool {
		got, err := b.store.GetJob(b.ctx, j.ID)
		require.NoError(t, err)
		return got.Progress != nil && *got.Progress == 40
	}, 10*time.Second, 50*time.Millisecond)
	got, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateRunning, got.Status)
	require.Equal(t, "copied 400 of 1000 rows", *got.ProgressMessage)

	require.Eventually(t, func() bool {
		lines, err := b.store.JobLogs(b.ctx, j.ID, 0, 10)
		require.NoError(t, err)
		return len(lines) == 2
	}, 10*time.Second, 50*time.Millisecond, "lines are written while the job runs")
	lines, err := b.store.JobLogs(b.ctx, j.ID, 0, 10)
	require.NoError(t, err)
	require.Equal(t, "info", lines[0].Level)
	require.NotContains(t, lines[0].Message, "hunter2", "scrubbed like the log file")
	require.Equal(t, logs.Redacted, lines[0].Attrs["token"])
	require.EqualValues(t, 42, lines[0].Attrs["rows"])
	require.Equal(t, 1, lines[0].Attempt)
	require.Equal(t, "warn", lines[1].Level)
	require.Equal(t, "copy", lines[1].Attrs["step"])
	require.EqualValues(t, 7, lines[1].Attrs["batch.n"])

	once.Do(func() { close(release) })
	b.waitFor(t, j.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	var all []domain.LogEntry
	require.Eventually(t, func() bool {
		all, err = b.store.JobLogs(b.ctx, j.ID, 0, 5000)
		require.NoError(t, err)
		return len(all) == domain.MaxJobLogLines+1
	}, 10*time.Second, 50*time.Millisecond, "capped at the limit plus one line that says so")
	require.Contains(t, all[len(all)-1].Message, fmt.Sprintf("more than %d lines", domain.MaxJobLogLines))
	require.Equal(t, "line 997", all[len(all)-2].Message)

	// The page a reader gets: lifecycle lines from the runs, in order.
	done, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	execs, err := b.store.ListExecutions(b.ctx, done)
	require.NoError(t, err)
	merged := domain.MergeLog(domain.LifecycleLines(done, execs, nil), all)
	require.Equal(t, domain.LogFromFlint, merged[0].Source)
	require.True(t, strings.HasPrefix(merged[0].Message, "Claimed by worker "), merged[0].Message)
	last := merged[len(merged)-1]
	require.Equal(t, domain.LogFromFlint, last.Source)
	require.True(t, strings.HasPrefix(last.Message, "Succeeded in "), last.Message)
}

// Groups nest as "outer.inner.key", and the log file's scrubbing rules
// apply whole: a group named like a secret is redacted, a secret inside
// JSON text is too.
func TestJobLogGroupsAndSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("grouped", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		log := jobs.Logger(ctx)
		log.WithGroup("outer").WithGroup("inner").Info("nested", "k", 1)
		log.WithGroup("auth").Info("signed in", "user", "bob")
		log.Info("calling", "body", `{"client_secret":"abc123","n":1}`)
		return nil, nil
	}))
	j := b.enqueue(t, "grouped", `{}`)
	b.start(t, workers.Config{Workers: 1})
	var lines []domain.LogEntry
	require.Eventually(t, func() bool {
		var err error
		lines, err = b.store.JobLogs(b.ctx, j.ID, 0, 10)
		require.NoError(t, err)
		return len(lines) == 3
	}, 20*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 1, lines[0].Attrs["outer.inner.k"], "%v", lines[0].Attrs)
	require.Equal(t, logs.Redacted, lines[1].Attrs["auth.user"], "%v", lines[1].Attrs)
	require.NotContains(t, lines[2].Attrs["body"], "abc123")
	require.Contains(t, lines[2].Attrs["body"], `"n":1`)
}

// logInsertCounter counts the lines the pool stores through its log writer.
type logInsertCounter struct {
	*db.Store
	lines atomic.Int64
}

func (c *logInsertCounter) InsertJobLogs(ctx context.Context, lines []domain.LogEntry) error {
	c.lines.Add(int64(len(lines)))
	return c.Store.InsertJobLogs(ctx, lines)
}

// The lines of a short first attempt go with its outcome, stored by the
// same statement, not by an insert of their own; a job that runs longer
// than a line waits has its lines written while it runs, and every line
// of both ends up in its log, in order.
func TestShortJobsLogWithTheirOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("quick", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		jobs.Logger(ctx).Info("first", "n", 1)
		jobs.Logger(ctx).Warn("second")
		return nil, nil
	}))
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	b.registry.Register("slow", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		jobs.Logger(ctx).Info("before")
		<-release
		jobs.Logger(ctx).Info("after")
		return nil, nil
	}))
	quick := make([]*jobs.Job, 20)
	for i := range quick {
		quick[i] = b.enqueue(t, "quick", `{}`)
	}
	slow := b.enqueue(t, "slow", `{}`)
	counter := &logInsertCounter{Store: b.store}
	pool := workers.NewPool(workers.Config{WorkerID: "logs", Workers: 8, PollInterval: 50 * time.Millisecond,
		HeartbeatInterval: time.Hour, LeaseTTL: time.Hour}, counter, b.registry, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	t.Cleanup(func() {
		once.Do(func() { close(release) })
		cancel()
		require.NoError(t, <-done)
	})

	for _, j := range quick {
		b.waitFor(t, j.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
		lines, err := b.store.JobLogs(b.ctx, j.ID, 0, 10)
		require.NoError(t, err)
		require.Len(t, lines, 2, "stored by the time the outcome is")
		require.Equal(t, []string{"first", "second"}, []string{lines[0].Message, lines[1].Message})
		require.EqualValues(t, 1, lines[0].Attrs["n"])
		require.Equal(t, "warn", lines[1].Level)
	}
	require.Eventually(t, func() bool {
		lines, err := b.store.JobLogs(b.ctx, slow.ID, 0, 10)
		require.NoError(t, err)
		return len(lines) == 1 && lines[0].Message == "before"
	}, 10*time.Second, 20*time.Millisecond, "a running job's line is written while it runs")
	require.EqualValues(t, 1, counter.lines.Load(), "only the running job's line took an insert of its own")

	// Its last line went to the writer, which waits to gather more; the
	// outcome waits for it, so the job never shows finished with its log
	// still filling in (a page stops following the log then).
	once.Do(func() { close(release) })
	b.waitFor(t, slow.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	lines, err := b.store.JobLogs(b.ctx, slow.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, lines, 2, "stored by the time the outcome is")
	require.Equal(t, "after", lines[1].Message)
}

// A job's log lines at or above the process log's level also go to the
// process log, with the job's id, type and attempt and the handler's own
// attributes; lines below it go to the job's log only.
func TestJobLinesReachTheProcessLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.registry.Register("chatty", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		jobs.Logger(ctx).Info("below the process log", "n", 1)
		jobs.Logger(ctx).With("step", "two").Warn("worth a look", "n", 2)
		return nil, nil
	}))
	j := b.enqueue(t, "chatty", `{}`)
	var out syncbuf.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool := workers.NewPool(workers.Config{WorkerID: "chatty", Workers: 2, PollInterval: 50 * time.Millisecond,
		HeartbeatInterval: time.Hour, LeaseTTL: time.Hour}, b.store, b.registry, logger)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- pool.Run(ctx) }()
	b.waitFor(t, j.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	cancel()
	require.NoError(t, <-done)

	var found []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["job_id"] == j.ID.String() {
			found = append(found, m)
		}
	}
	require.Len(t, found, 1, "only the warning reached the process log:\n%s", out.String())
	require.Equal(t, "worth a look", found[0]["msg"])
	require.Equal(t, "chatty", found[0]["type"])
	require.EqualValues(t, j.Attempt+1, found[0]["attempt"])
	require.Equal(t, "two", found[0]["step"])
	require.EqualValues(t, 2, found[0]["n"])

	lines, err := b.store.JobLogs(b.ctx, j.ID, 0, 10)
	require.NoError(t, err)
	var msgs []string
	for _, l := range lines {
		msgs = append(msgs, l.Message)
	}
	require.Subset(t, msgs, []string{"below the process log", "worth a look"}, "both in the job's own log")
}
