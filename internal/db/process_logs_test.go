package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/logs"
)

var (
	procA = logs.Process{ID: "host-a-100-aaa", Host: "host-a", Role: "api"}
	procB = logs.Process{ID: "worker-b", Host: "host-b", Role: "worker"}
)

// shipTo returns a logger of process p whose entries go to store, and a
// function that stops it once everything logged is stored.
func shipTo(t *testing.T, store *db.Store, p logs.Process) (*logs.Logger, func()) {
	t.Helper()
	lg, err := logs.New(logs.Config{Stdout: io.Discard, Level: "debug"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lg.Ship(ctx, store, logs.ShipConfig{Process: p, Interval: 10 * time.Millisecond})
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(func() {
		stop()
		require.Zero(t, lg.Dropped())
	})
	return lg, stop
}

func nOf(t *testing.T, e logs.Entry) int {
	t.Helper()
	f, ok := e.Attrs["n"].(float64)
	require.True(t, ok, "%+v", e)
	return int(f)
}

func readLogs(t *testing.T, b *testBundle, q logs.Query) []logs.Entry {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 500
	}
	es, next, err := b.store.ReadLogs(b.ctx, q)
	require.NoError(t, err)
	require.Empty(t, next)
	return es
}

// logFromTwoProcesses logs through a logger of each of procA and procB: 40
// lines of every level and component, about jobA or jobB (returned), some
// with a needle in them; one that mentions jobB without being about it;
// and, from since on, five late ones. It returns once all are stored.
func logFromTwoProcesses(t *testing.T, b *testBundle) (jobB uuid.UUID, since time.Time) {
	t.Helper()
	lgA, stopA := shipTo(t, b.store, procA)
	lgB, stopB := shipTo(t, b.store, procB)
	jobA := uuid.New()
	jobB = uuid.New()
	for i := 0; i < 40; i++ {
		l, job, comp := lgA.Slog(), jobA, "worker"
		if i%2 == 1 {
			l, comp = lgB.Slog(), "reaper"
		}
		if i%3 == 0 {
			job = jobB
		}
		msg := fmt.Sprintf("message %d", i)
		args := []any{"n", i, "job_id", job, "component", comp}
		switch i % 10 {
		case 1:
			msg += " with NeEdLe inside"
		case 2:
			args = append(args, "detail", "xxneedlexx")
		}
		[]func(string, ...any){l.Debug, l.Info, l.Warn, l.Error}[i%4](msg, args...)
	}
	// Mentions jobB without being about it.
	lgA.Slog().Info("waiting for "+jobB.String(), "n", 45, "job_id", jobA, "depends_on", jobB)
	// The late lines come a moment later, so that a time (since) lies
	// strictly between them and the others at the store's precision.
	time.Sleep(5 * time.Millisecond)
	since = time.Now()
	for i := 50; i < 55; i++ {
		lgB.Slog().Info("late", "n", i)
	}
	stopA()
	stopB()
	return jobB, since
}

// Two processes log through their own loggers; the store reads both back,
// newest first, and each filter selects what it says.
func TestReadLogsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jobB, since := logFromTwoProcesses(t, b)

	all := readLogs(t, b, logs.Query{})
	require.Len(t, all, 46)
	require.Equal(t, 54, nOf(t, all[0]), "newest first")
	require.Equal(t, "late", all[0].Msg)
	require.Equal(t, "INFO", all[0].Level)
	require.Equal(t, procB, logs.Process{ID: all[0].ProcessID, Host: all[0].Host, Role: all[0].Role})
	require.NotContains(t, all[1].Attrs, "msg")
	for i := 1; i < len(all); i++ {
		require.False(t, all[i].Time.After(all[i-1].Time))
	}

	warn := readLogs(t, b, logs.Query{Level: "WARN"})
	require.Len(t, warn, 20)
	for _, e := range warn {
		require.Contains(t, []string{"WARN", "ERROR"}, e.Level)
	}
	require.Len(t, readLogs(t, b, logs.Query{Level: "error"}), 10)
	require.Len(t, readLogs(t, b, logs.Query{Level: "info"}), 36) // 30 of the first 40, n=45 and 5 late ones

	onA := readLogs(t, b, logs.Query{Process: procA.ID})
	require.Len(t, onA, 21)
	for _, e := range onA {
		require.Equal(t, procA.ID, e.ProcessID)
		require.Equal(t, "api", e.Role)
		require.Equal(t, "host-a", e.Host)
	}
	require.Len(t, readLogs(t, b, logs.Query{Process: procB.ID}), 25)
	require.Empty(t, readLogs(t, b, logs.Query{Process: "nobody"}))
	require.Len(t, readLogs(t, b, logs.Query{Component: "reaper"}), 20)
	require.Len(t, readLogs(t, b, logs.Query{Component: "reaper", Process: procA.ID}), 0)

	byJob := readLogs(t, b, logs.Query{JobID: strings.ToUpper(jobB.String())})
	require.Len(t, byJob, 14)
	for _, e := range byJob {
		require.Equal(t, jobB.String(), e.JobID)
	}

	needle := readLogs(t, b, logs.Query{Q: "needle"})
	require.Len(t, needle, 8)
	for _, e := range needle {
		require.Contains(t, []int{1, 2}, nOf(t, e)%10)
	}
	require.Len(t, readLogs(t, b, logs.Query{Q: "NEEDLE", Level: "warn"}), 4) // i%4 >= 2 among 1,2,11,12,21,22,31,32
	require.Len(t, readLogs(t, b, logs.Query{Q: jobB.String()[:13]}), 15, "the job id, and the message that mentions it")
	require.Len(t, readLogs(t, b, logs.Query{Q: "depends_on"}), 1, "attribute keys")
	require.Len(t, readLogs(t, b, logs.Query{Q: "100%"}), 0, "LIKE wildcards match literally")
	require.Empty(t, readLogs(t, b, logs.Query{Q: "no such thing"}))

	late := readLogs(t, b, logs.Query{Since: since})
	require.Len(t, late, 5)
	for i, e := range late {
		require.Equal(t, 54-i, nOf(t, e))
	}
	require.Len(t, readLogs(t, b, logs.Query{Until: since}), 41)
	require.Empty(t, readLogs(t, b, logs.Query{Since: time.Now().Add(time.Hour)}))

	_, _, err := b.store.ReadLogs(b.ctx, logs.Query{Level: "loud"})
	var qe *logs.QueryError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "level", qe.Field)
}

// Paging newest first by (time, id) has neither gaps nor duplicates, with
// many entries sharing a time, across processes, with a filter, and while
// new entries arrive between pages.
func TestReadLogsPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	const n = 1200
	var batch []logs.Entry
	flush := func(p logs.Process) {
		require.NoError(t, b.store.InsertLogs(b.ctx, p, batch))
		batch = nil
	}
	for i := 0; i < n; i++ {
		// Three entries per millisecond, from both processes.
		batch = append(batch, logs.Entry{Time: base.Add(time.Duration(i/3) * time.Millisecond), Level: "INFO", Msg: "line",
			Attrs: map[string]any{"n": i}})
		if len(batch) == 100 {
			flush([]logs.Process{procA, procB}[i/100%2])
		}
	}
	readAll := func(q logs.Query) []int {
		var out []int
		for pages := 0; ; pages++ {
			require.Less(t, pages, 1000)
			es, next, err := b.store.ReadLogs(b.ctx, q)
			require.NoError(t, err)
			for _, e := range es {
				out = append(out, nOf(t, e))
			}
			if next == "" {
				return out
			}
			require.Len(t, es, q.Limit, "a full page precedes every cursor")
			q.Before = next
		}
	}
	descending := func(from, to int, keep func(int) bool) []int {
		var out []int
		for i := from; i >= to; i-- {
			if keep == nil || keep(i) {
				out = append(out, i)
			}
		}
		return out
	}
	// Within a millisecond the later insert (the higher id) comes first.
	require.Equal(t, descending(n-1, 0, nil), readAll(logs.Query{Limit: 97}))
	sevens := func(i int) bool { return strings.Contains(strconv.Itoa(i), "7") }
	require.Equal(t, descending(n-1, 0, sevens), readAll(logs.Query{Limit: 33, Q: "7"}))
	require.Equal(t, descending(n-1, 0, func(i int) bool { return i/100%2 == 1 }), readAll(logs.Query{Limit: 41, Process: procB.ID}))

	// New entries between pages do not move the pages that follow.
	page, next, err := b.store.ReadLogs(b.ctx, logs.Query{Limit: 50})
	require.NoError(t, err)
	require.Len(t, page, 50)
	require.NoError(t, b.store.InsertLogs(b.ctx, procA, []logs.Entry{{Time: base.Add(time.Hour), Level: "INFO", Msg: "newer", Attrs: map[string]any{"n": n}}}))
	require.Equal(t, descending(n-51, 0, nil), readAll(logs.Query{Limit: 61, Before: next}))
}

// The processes seen are listed once each, the most recently heard from
// first, with their host and role.
func TestLogProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps, err := b.store.LogProcesses(b.ctx, 10)
	require.NoError(t, err)
	require.Empty(t, ps)
	old := time.Now().Add(-time.Hour)
	for i := 0; i < 3; i++ {
		require.NoError(t, b.store.InsertLogs(b.ctx, procA, []logs.Entry{{Time: old.Add(time.Duration(i) * time.Second), Level: "INFO", Msg: "a"}}))
		require.NoError(t, b.store.InsertLogs(b.ctx, procB, []logs.Entry{{Time: time.Now(), Level: "INFO", Msg: "b"}}))
	}
	ps, err = b.store.LogProcesses(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, procB, ps[0].Process)
	require.Equal(t, procA, ps[1].Process)
	require.WithinDuration(t, old.Add(2*time.Second), ps[1].Last, time.Millisecond)
	ps, err = b.store.LogProcesses(b.ctx, 1)
	require.NoError(t, err)
	require.Len(t, ps, 1)
}

// Retention deletes entries past it, oldest first, a batch at a time.
func TestPruneLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	var es []logs.Entry
	for _, age := range []int{20, 10, 9, 8, 6, 1} { // days
		es = append(es, logs.Entry{Time: now.Add(-time.Duration(age) * 24 * time.Hour), Level: "INFO", Msg: "aged", Attrs: map[string]any{"n": age}})
	}
	require.NoError(t, b.store.InsertLogs(b.ctx, procA, es))
	n, err := b.store.PruneLogs(b.ctx, 0, nil, 100)
	require.NoError(t, err)
	require.Zero(t, n, "0 keeps them for ever")
	n, err = b.store.PruneLogs(b.ctx, 7, nil, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	left := readLogs(t, b, logs.Query{})
	require.Len(t, left, 4)
	require.Equal(t, 9, nOf(t, left[len(left)-1]), "the oldest went first")
	n, err = b.store.PruneLogs(b.ctx, 7, nil, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = b.store.PruneLogs(b.ctx, 7, nil, 2)
	require.NoError(t, err)
	require.Zero(t, n)
	later := now.Add(3 * 24 * time.Hour)
	n, err = b.store.PruneLogs(b.ctx, 7, &later, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "judged at the time given")
	require.Len(t, readLogs(t, b, logs.Query{}), 1)
}

// What PostgreSQL refuses in text and jsonb (NUL) is dropped rather than
// failing the batch; other odd values are kept as they were.
func TestInsertLogsOddValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.store.InsertLogs(b.ctx, procA, []logs.Entry{
		{Time: time.Now(), Level: "INFO+2", Msg: "nul\x00inside", Component: "c\x00", JobID: "not-a-uuid",
			Attrs: map[string]any{"k\x00": "v\x00", "list": []any{"a\x00", 1.5}, "nested": map[string]any{"x": "\x00"}, "json": json.Number("12345678901234567890")}},
		{Time: time.Now(), Level: "shouting", Msg: "unknown level"},
	}))
	es := readLogs(t, b, logs.Query{})
	require.Len(t, es, 2)
	byMsg := map[string]logs.Entry{}
	for _, e := range es {
		byMsg[e.Msg] = e
	}
	odd := byMsg["nulinside"]
	require.Equal(t, "INFO+2", odd.Level)
	require.Equal(t, "c", odd.Component)
	require.Empty(t, odd.JobID)
	require.Equal(t, "not-a-uuid", odd.Attrs["job_id"], "kept as an attribute")
	require.Equal(t, "v", odd.Attrs["k"])
	require.Equal(t, []any{"a", 1.5}, odd.Attrs["list"])
	require.Equal(t, "INFO", byMsg["unknown level"].Level)
	require.Len(t, readLogs(t, b, logs.Query{Level: "warn"}), 0)
	require.Len(t, readLogs(t, b, logs.Query{Level: "info"}), 2)
}
