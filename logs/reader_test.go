package logs

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// pad makes a log line about 1 KiB so megabytes are reached quickly.
var pad = strings.Repeat("x", 900)

func newFileLogger(t *testing.T, cfg Config) *Logger {
	t.Helper()
	if cfg.File == "" {
		cfg.File = filepath.Join(t.TempDir(), "logs", "flint.log")
	}
	if cfg.Stdout == nil {
		cfg.Stdout = discard{}
	}
	lg, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lg.Close() })
	return lg
}

// readAll pages through the whole log with the given page size.
func readAll(t *testing.T, lg *Logger, q Query) ([]Entry, int) {
	t.Helper()
	var all []Entry
	pages := 0
	for {
		es, next, err := lg.Read(q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(es), q.Limit)
		pages++
		all = append(all, es...)
		if next == "" {
			return all, pages
		}
		require.Len(t, es, q.Limit, "a full page precedes every cursor")
		q.Before = next
		require.Less(t, pages, 100000)
	}
}

func seqOf(t *testing.T, e Entry) int {
	t.Helper()
	n, err := strconv.Atoi(string(e.Attrs["n"].(json.Number)))
	require.NoError(t, err)
	return n
}

// requireContiguous checks entries are n = from, from-1, …, to exactly.
func requireContiguous(t *testing.T, es []Entry, from, to int) {
	t.Helper()
	require.Len(t, es, from-to+1)
	for i, e := range es {
		require.Equal(t, from-i, seqOf(t, e), "entry %d", i)
	}
}

// backups lists lumberjack's rotated files next to file.
func backups(t *testing.T, file string) []string {
	t.Helper()
	fs, err := listLogFiles(file)
	require.NoError(t, err)
	var out []string
	for _, f := range fs {
		if !f.rotated.IsZero() {
			out = append(out, f.path)
		}
	}
	return out
}

func logSeq(lg *Logger, from, to int) {
	for i := from; i < to; i++ {
		lg.Slog().Info("line", "n", i, "pad", pad)
	}
}

func TestRotationKeepsAtMostMaxBackupsAndReadReachesThem(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{MaxSizeMB: 1, MaxBackups: 2})
	const n = 3600 // ≈ 3.5 MB
	logSeq(lg, 0, n)

	// lumberjack removes surplus backups in the background.
	require.Eventually(t, func() bool { return len(backups(t, lg.File())) == 2 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.Len(t, backups(t, lg.File()), 2)
	for _, b := range backups(t, lg.File()) {
		st, err := os.Stat(b)
		require.NoError(t, err)
		require.LessOrEqual(t, st.Size(), int64(1<<20))
	}

	// The oldest entry of the live file, to prove Read goes beyond it.
	cur, err := os.ReadFile(lg.File())
	require.NoError(t, err)
	first, ok := parseEntry([]byte(strings.SplitN(string(cur), "\n", 2)[0]))
	require.True(t, ok)
	firstLive := seqOf(t, first)

	all, pages := readAll(t, lg, Query{Limit: 500})
	require.Greater(t, pages, 1)
	oldest := seqOf(t, all[len(all)-1])
	require.Less(t, oldest, firstLive, "entries from the backups are read")
	requireContiguous(t, all, n-1, oldest)
}

func TestPaginationAcrossRotation(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{MaxSizeMB: 1, MaxBackups: 4})
	const n = 2500 // ≈ 2.4 MB: the live file and two backups
	logSeq(lg, 0, n)
	require.Len(t, backups(t, lg.File()), 2)

	// Whole log, odd page size so pages straddle the file boundaries.
	all, _ := readAll(t, lg, Query{Limit: 97})
	requireContiguous(t, all, n-1, 0)

	// Rotation between pages: the cursor's file is renamed to a backup and
	// a new live file begins; paging continues where it stopped.
	page, next, err := lg.Read(Query{Limit: 50})
	require.NoError(t, err)
	requireContiguous(t, page, n-1, n-50)
	require.NotEmpty(t, next)
	logSeq(lg, n, n+1100) // > 1 MB: at least one more rotation
	require.Len(t, backups(t, lg.File()), 3)
	rest, _ := readAll(t, lg, Query{Limit: 61, Before: next})
	requireContiguous(t, rest, n-51, 0)

	// Filtered paging across the boundaries: every entry whose n has a 7.
	sevens, _ := readAll(t, lg, Query{Limit: 33, Q: "7"})
	var want []int
	for i := n + 1100 - 1; i >= 0; i-- {
		if strings.Contains(strconv.Itoa(i), "7") {
			want = append(want, i)
		}
	}
	got := make([]int, len(sevens))
	for i, e := range sevens {
		got[i] = seqOf(t, e)
	}
	require.Equal(t, want, got)
}

func TestCompressedBackups(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{MaxSizeMB: 1, Compress: true})
	const n = 2500
	logSeq(lg, 0, n)
	require.Eventually(t, func() bool {
		bs := backups(t, lg.File())
		if len(bs) != 2 {
			return false
		}
		for _, b := range bs {
			if !strings.HasSuffix(b, ".gz") {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond)
	all, _ := readAll(t, lg, Query{Limit: 400})
	requireContiguous(t, all, n-1, 0)
}

func TestReadFilters(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{Level: "debug"})
	l := lg.Slog()
	jobA, jobB := uuid.New(), uuid.New()
	levels := []func(string, ...any){l.Debug, l.Info, l.Warn, l.Error}
	for i := 0; i < 40; i++ {
		job := jobA
		if i%3 == 0 {
			job = jobB
		}
		msg := fmt.Sprintf("message %d", i)
		args := []any{"n", i, "job_id", job, "component", "worker"}
		switch i % 10 {
		case 1:
			msg += " with NeEdLe inside"
		case 2:
			args = append(args, "detail", "xxneedlexx")
		}
		levels[i%4](msg, args...)
	}
	// Mentions jobB without being about it.
	l.Info("waiting for "+jobB.String(), "n", 45, "job_id", jobA, "depends_on", jobB)
	time.Sleep(5 * time.Millisecond)
	since := time.Now()
	for i := 50; i < 55; i++ {
		l.Info("late", "n", i)
	}

	read := func(q Query) []Entry {
		q.Limit = 500
		es, next, err := lg.Read(q)
		require.NoError(t, err)
		require.Empty(t, next)
		return es
	}
	require.Len(t, read(Query{}), 46)

	warn := read(Query{Level: "WARN"})
	require.Len(t, warn, 20)
	for _, e := range warn {
		require.Contains(t, []string{"WARN", "ERROR"}, e.Level)
	}
	require.Len(t, read(Query{Level: "error"}), 10)
	require.Len(t, read(Query{Level: "info"}), 36) // 30 of the first 40, n=45 and 5 late ones

	byJob := read(Query{JobID: strings.ToUpper(jobB.String())})
	require.Len(t, byJob, 14)
	for _, e := range byJob {
		require.Equal(t, jobB.String(), e.JobID)
		require.Equal(t, "worker", e.Component)
	}

	needle := read(Query{Q: "needle"})
	require.Len(t, needle, 8)
	for _, e := range needle {
		require.Contains(t, []int{1, 2}, seqOf(t, e)%10)
	}
	require.Len(t, read(Query{Q: "NEEDLE", Level: "warn"}), 4) // i%4 >= 2 among 1,2,11,12,21,22,31,32
	require.Empty(t, read(Query{Q: "no such thing"}))

	late := read(Query{Since: since})
	require.Len(t, late, 5)
	for i, e := range late {
		require.Equal(t, 54-i, seqOf(t, e))
		require.False(t, e.Time.Before(since))
	}
	require.Empty(t, read(Query{Since: time.Now().Add(time.Hour)}))

	// Newest first, with the well-known keys lifted out of Attrs.
	all := read(Query{})
	require.Equal(t, 54, seqOf(t, all[0]))
	require.Equal(t, "late", all[0].Msg)
	require.Equal(t, "INFO", all[0].Level)
	require.NotContains(t, all[1].Attrs, "msg")
	require.True(t, json.Valid(all[0].Raw))

	// The live tail filters entries with the reader's rules.
	for _, q := range []Query{{Level: "WARN"}, {Level: "error"}, {JobID: strings.ToUpper(jobB.String())}, {Q: "needle"},
		{Q: "NEEDLE", Level: "warn"}, {Q: "level"}, {Q: "msg"}, {Q: "worker"}} {
		want := read(q)
		require.NoError(t, q.Validate())
		matches := q.Matcher()
		var live []Entry
		for _, e := range all {
			if matches(e) {
				live = append(live, e)
			}
		}
		require.Len(t, live, len(want), "%+v", q)
	}
}

func TestQueryValidation(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{})
	bad := []struct {
		q     Query
		field string
	}{
		{Query{Level: "loud"}, "level"},
		{Query{Limit: 501}, "limit"},
		{Query{Limit: -1}, "limit"},
		{Query{JobID: "42"}, "job_id"},
		{Query{Q: strings.Repeat("q", 300)}, "q"},
		{Query{Before: "not a cursor!"}, "before"},
		{Query{Before: "djEueHl6LjE"}, "before"}, // base64 of "v1.xyz.1"
	}
	for _, c := range bad {
		_, _, err := lg.Read(c.q)
		var qe *QueryError
		require.True(t, errors.As(err, &qe), "%+v: %v", c.q, err)
		require.Equal(t, c.field, qe.Field)
		require.NotEmpty(t, qe.Message)
	}
	for _, q := range []Query{{Level: "warning", Limit: 500}, {Level: "DEBUG", Limit: 1}, {JobID: uuid.NewString()}} {
		_, _, err := lg.Read(q)
		require.NoError(t, err)
	}
	q := Query{}
	require.NoError(t, q.Validate())
	require.Equal(t, DefaultLimit, q.Limit)

	stdoutOnly, err := New(Config{File: "-", Stdout: discard{}})
	require.NoError(t, err)
	_, _, err = stdoutOnly.Read(Query{})
	require.ErrorIs(t, err, ErrNoFile)
}

// The file may hold things the reader must step over: foreign lines, torn
// JSON, a line far over the cap, and a record still being written.
func TestReadSkipsBadLines(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{})
	line := func(n int) string {
		return fmt.Sprintf(`{"time":"2024-05-01T10:00:%02dZ","level":"INFO","msg":"ok","n":%d}`+"\n", n, n)
	}
	huge := `{"time":"2024-05-01T10:00:30Z","level":"INFO","msg":"huge","blob":"` + strings.Repeat("h", 200<<10) + `"}` + "\n"
	// Over the cap but short enough to be found whole within two reads.
	big := `{"time":"2024-05-01T10:00:31Z","level":"INFO","msg":"big","blob":"` + strings.Repeat("b", 100<<10) + `"}` + "\n"
	content := line(0) + "panic: something not json\n" + line(1) + `{"time":"2024-05-01T10:00:` + "\n" +
		huge + big + line(2) + "\n" + `["array"]` + "\n" + line(3) + `{"time":"2024-05-01T10:00:59Z","level":"INFO","msg":"partial`
	require.NoError(t, os.WriteFile(lg.File(), []byte(content), 0o600))

	es, next, err := lg.Read(Query{Limit: 500})
	require.NoError(t, err)
	require.Empty(t, next)
	requireContiguous(t, es, 3, 0)

	// One by one, so each cursor lands next to a bad line.
	all, _ := readAll(t, lg, Query{Limit: 1})
	requireContiguous(t, all, 3, 0)

	// A huge first line: the file is still identifiable for cursors.
	require.NoError(t, os.WriteFile(lg.File(), []byte(huge+line(0)+line(1)+line(2)), 0o600))
	all, _ = readAll(t, lg, Query{Limit: 1})
	requireContiguous(t, all, 2, 0)
}

func TestCursorIntoRemovedFileEndsPaging(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{})
	logSeq(lg, 0, 10)
	_, next, err := lg.Read(Query{Limit: 3})
	require.NoError(t, err)
	require.NotEmpty(t, next)
	// Simulate retention having removed that file: a different file now.
	require.NoError(t, os.WriteFile(lg.File(), []byte(`{"time":"2024-05-01T10:00:00Z","level":"INFO","msg":"other","n":1}`+"\n"), 0o600))
	es, next2, err := lg.Read(Query{Limit: 3, Before: next})
	require.NoError(t, err)
	require.Empty(t, es)
	require.Empty(t, next2)
}

func TestReadHandwrittenGzipBackup(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{})
	dir := filepath.Dir(lg.File())
	write := func(name string, from, to int, gz bool) {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, `{"time":"2024-05-01T10:%02d:00Z","level":"INFO","msg":"m","n":%d}`+"\n", i, i)
		}
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(t, err)
		defer f.Close()
		if gz {
			zw := gzip.NewWriter(f)
			_, err = zw.Write([]byte(b.String()))
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			return
		}
		_, err = f.WriteString(b.String())
		require.NoError(t, err)
	}
	write("flint-2024-05-01T10-10-00.000.log.gz", 0, 10, true)
	write("flint-2024-05-01T10-20-00.000.log", 10, 20, false)
	write("flint.log", 20, 30, false)
	write("unrelated-2024-05-01T10-30-00.000.log", 100, 110, false)
	all, _ := readAll(t, lg, Query{Limit: 7})
	requireContiguous(t, all, 29, 0)

	// Since skips whole backups rotated before it (minus slack) yet still
	// returns exactly the matching entries.
	es, _, err := lg.Read(Query{Since: time.Date(2024, 5, 1, 10, 15, 0, 0, time.UTC), Limit: 100})
	require.NoError(t, err)
	requireContiguous(t, es, 29, 15)
}

func TestOversizedRecordIsShortenedInFileAndTail(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{}
	lg := newFileLogger(t, Config{Stdout: out})
	job := uuid.NewString()
	lg.Slog().Info("big payload", "job_id", job, "blob", strings.Repeat("z", 100<<10))
	lg.Slog().Info("after", "n", 1)

	require.Greater(t, len(out.String()), 100<<10, "stdout gets the whole record")
	file, err := os.ReadFile(lg.File())
	require.NoError(t, err)
	require.Less(t, len(file), MaxLineBytes)
	es, _, err := lg.Read(Query{JobID: job})
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, "big payload", es[0].Msg)
	require.NotContains(t, es[0].Attrs, "blob")
	require.Contains(t, es[0].Attrs, "truncated_bytes")
	recent, _, _ := lg.Tail().Since(0, nil, 2)
	require.Len(t, recent, 2)
	require.Equal(t, job, recent[0].JobID)
	require.Less(t, len(recent[0].Raw), MaxLineBytes)
}
