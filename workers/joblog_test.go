package workers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
	"github.com/flinthq/flint/logs"
	"github.com/flinthq/flint/workers"
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
		for i := range jobs.MaxJobLogLines + 5 {
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
	var all []jobs.LogEntry
	require.Eventually(t, func() bool {
		all, err = b.store.JobLogs(b.ctx, j.ID, 0, 5000)
		require.NoError(t, err)
		return len(all) == jobs.MaxJobLogLines+1
	}, 10*time.Second, 50*time.Millisecond, "capped at the limit plus one line that says so")
	require.Contains(t, all[len(all)-1].Message, fmt.Sprintf("more than %d lines", jobs.MaxJobLogLines))
	require.Equal(t, "line 997", all[len(all)-2].Message)

	// The page a reader gets: lifecycle lines from the runs, in order.
	done, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	execs, err := b.store.ListExecutions(b.ctx, done)
	require.NoError(t, err)
	merged := jobs.MergeLog(jobs.LifecycleLines(done, execs, nil), all)
	require.Equal(t, jobs.LogFromFlint, merged[0].Source)
	require.True(t, strings.HasPrefix(merged[0].Message, "Claimed by worker "), merged[0].Message)
	last := merged[len(merged)-1]
	require.Equal(t, jobs.LogFromFlint, last.Source)
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
	var lines []jobs.LogEntry
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
