package logs

import (
	"encoding/json"
	"errors"
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

func seqOf(t *testing.T, e Entry) int {
	t.Helper()
	n, err := strconv.Atoi(string(e.Attrs["n"].(json.Number)))
	require.NoError(t, err)
	return n
}

func logSeq(lg *Logger, from, to int) {
	for i := from; i < to; i++ {
		lg.Slog().Info("line", "n", i, "pad", pad)
	}
}

// The file rotates at MaxSizeMB and keeps MaxBackups, each whole JSON
// lines, the newest entries in the live file.
func TestRotationKeepsAtMostMaxBackups(t *testing.T) {
	t.Parallel()
	lg := newFileLogger(t, Config{MaxSizeMB: 1, MaxBackups: 2})
	const n = 3600 // ≈ 3.5 MB
	logSeq(lg, 0, n)

	backups := func() []string {
		m, err := filepath.Glob(filepath.Join(filepath.Dir(lg.File()), "flint-*.log"))
		require.NoError(t, err)
		return m
	}
	// lumberjack removes surplus backups in the background.
	// Every rotation happened while logging (writes are synchronous), so
	// from here the count only falls, and never below MaxBackups.
	require.Eventually(t, func() bool { return len(backups()) == 2 }, 5*time.Second, 10*time.Millisecond)
	require.Len(t, backups(), 2)
	for _, b := range append(backups(), lg.File()) {
		data, err := os.ReadFile(b)
		require.NoError(t, err)
		require.LessOrEqual(t, len(data), 1<<20)
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			_, ok := parseEntry([]byte(line))
			require.True(t, ok, "%s holds whole entries", b)
		}
	}
	cur, err := os.ReadFile(lg.File())
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(cur), "\n"), "\n")
	last, ok := parseEntry([]byte(lines[len(lines)-1]))
	require.True(t, ok)
	require.Equal(t, n-1, seqOf(t, last))
}

func TestQueryValidation(t *testing.T) {
	t.Parallel()
	bad := []struct {
		q     Query
		field string
	}{
		{Query{Level: "loud"}, "level"},
		{Query{Limit: 501}, "limit"},
		{Query{Limit: -1}, "limit"},
		{Query{JobID: "42"}, "job_id"},
		{Query{Q: strings.Repeat("q", 300)}, "q"},
		{Query{Q: "bell\a"}, "q"},
		{Query{Process: strings.Repeat("p", 201)}, "process"},
		{Query{Component: "new\nline"}, "component"},
		{Query{Since: time.Unix(100, 0), Until: time.Unix(100, 0)}, "until"},
		{Query{Before: "not a cursor!"}, "before"},
		{Query{Before: "djEueHl6LjE"}, "before"}, // base64 of "v1.xyz.1", a cursor of the file reader Flint had
	}
	for _, c := range bad {
		err := c.q.Validate()
		var qe *QueryError
		require.True(t, errors.As(err, &qe), "%+v: %v", c.q, err)
		require.Equal(t, c.field, qe.Field)
		require.NotEmpty(t, qe.Message)
	}
	job := uuid.New()
	q := Query{Level: "warning", Limit: 500, JobID: strings.ToUpper(job.String()), Process: "host-1-abc", Component: "reaper"}
	require.NoError(t, q.Validate())
	require.Equal(t, "warn", q.Level, "canonical level")
	require.Equal(t, job.String(), q.JobID, "canonical job id")
	require.Equal(t, 4, int(q.MinLevel()))
	q = Query{}
	require.NoError(t, q.Validate())
	require.Equal(t, DefaultLimit, q.Limit)
	require.Equal(t, -4, int(q.MinLevel()), "no level filter: debug and up")
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := Cursor{Time: time.Date(2026, 12, 2, 3, 4, 5, 123456000, time.UTC), ID: 987654321}
	q := Query{Before: c.String()}
	require.NoError(t, q.Validate())
	got, ok := q.BeforeCursor()
	require.True(t, ok)
	require.Equal(t, c, got)
	_, ok = Query{}.BeforeCursor()
	require.False(t, ok)
}

// Lines that are not slog's JSON records are refused, not half read; the
// well-known keys are lifted, and put back for storage.
func TestParseEntry(t *testing.T) {
	t.Parallel()
	for _, line := range []string{"", "panic: something not json", `{"time":"2024-05-01T10:00:`, `["array"]`, `{"n":1}`, `"text"`} {
		_, ok := parseEntry([]byte(line))
		require.False(t, ok, line)
	}
	job := uuid.NewString()
	e, ok := parseEntry([]byte(`{"time":"2024-05-01T10:00:00.5Z","level":"WARN","msg":"m","component":"worker","job_id":"` + job +
		`","worker_id":"w1","type":"email","queue":"q","error":"boom","n":7,"g":{"k":"v"}}`))
	require.True(t, ok)
	require.Equal(t, Entry{Time: time.Date(2024, 5, 1, 10, 0, 0, 5e8, time.UTC), Level: "WARN", Msg: "m", Component: "worker",
		JobID: job, WorkerID: "w1", Type: "email", Queue: "q", Error: "boom",
		Attrs: map[string]any{"n": json.Number("7"), "g": map[string]any{"k": "v"}}}, e)
	require.Equal(t, map[string]any{"n": json.Number("7"), "g": map[string]any{"k": "v"}, "worker_id": "w1", "type": "email",
		"queue": "q", "error": "boom"}, e.StoredAttrs())
	require.Len(t, e.Attrs, 2, "StoredAttrs leaves the entry alone")

	back := Entry{Attrs: e.StoredAttrs()}
	back.LiftAttrs()
	require.Equal(t, "boom", back.Error)
	require.Equal(t, "w1", back.WorkerID)
	require.Len(t, back.Attrs, 2)
}
