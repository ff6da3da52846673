package logs

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Entry is one parsed log record. The well-known keys are lifted out of
// Attrs; everything else (including groups, as nested maps) stays in Attrs.
// Entries handed to several tail subscribers share Attrs and Raw: treat
// them as read-only.
type Entry struct {
	Time      time.Time       `json:"time"`
	Level     string          `json:"level"`
	Msg       string          `json:"msg"`
	Component string          `json:"component,omitempty"`
	JobID     string          `json:"job_id,omitempty"`
	WorkerID  string          `json:"worker_id,omitempty"`
	Type      string          `json:"type,omitempty"`
	Queue     string          `json:"queue,omitempty"`
	Error     string          `json:"error,omitempty"`
	Attrs     map[string]any  `json:"attrs,omitempty"`
	Raw       json.RawMessage `json:"raw,omitempty"`
}

// Query selects entries for Read.
type Query struct {
	Level  string    // minimum level: debug, info, warn (warning), error; "" = all
	JobID  string    // job id (UUID); "" = all
	Q      string    // case-insensitive substring of the message or any attribute key or value
	Since  time.Time // entries at or after Since; zero = all
	Before string    // opaque cursor from a previous Read; "" = newest
	Limit  int       // 1..MaxLimit; 0 = DefaultLimit
}

const (
	DefaultLimit = 100
	MaxLimit     = 500
	// MaxLineBytes caps one log line; longer lines are skipped by the reader.
	MaxLineBytes = 64 << 10
	maxQLen      = 256
	// maxGzipBytes bounds what a compressed backup may expand to in memory.
	maxGzipBytes = 1 << 30
	// sinceSlack allows for records written slightly out of time order
	// (concurrent loggers) when deciding that the rest is too old.
	sinceSlack = time.Minute
)

// QueryError reports an invalid Query field (the API answers 422).
type QueryError struct {
	Field   string
	Message string
}

func (e *QueryError) Error() string { return e.Field + ": " + e.Message }

// ErrNoFile is returned by Read when the Logger writes to stdout only.
var ErrNoFile = errors.New("logs: no log file configured")

// Validate checks q and fills in defaults (Limit, canonical Level and
// JobID). It returns a *QueryError.
func (q *Query) Validate() error {
	if q.Level != "" {
		lv, err := parseLevel(q.Level)
		if err != nil {
			return &QueryError{Field: "level", Message: "must be one of debug, info, warn, error"}
		}
		q.Level = strings.ToLower(lv.String())
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 1 || q.Limit > MaxLimit:
		return &QueryError{Field: "limit", Message: fmt.Sprintf("must be between 1 and %d", MaxLimit)}
	}
	if q.JobID != "" {
		id, err := uuid.Parse(q.JobID)
		if err != nil {
			return &QueryError{Field: "job_id", Message: "must be a job id (UUID)"}
		}
		q.JobID = id.String()
	}
	if len(q.Q) > maxQLen {
		return &QueryError{Field: "q", Message: fmt.Sprintf("must be at most %d bytes", maxQLen)}
	}
	if !utf8.ValidString(q.Q) {
		return &QueryError{Field: "q", Message: "must be valid UTF-8"}
	}
	if q.Before != "" {
		if _, err := decodeCursor(q.Before); err != nil {
			return &QueryError{Field: "before", Message: "is not a cursor returned by this API"}
		}
	}
	return nil
}

// parseLevel accepts debug|info|warn|warning|error in any case (and slog's
// own forms such as "INFO+2").
func parseLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if strings.EqualFold(s, "warning") {
		s = "warn"
	}
	err := lv.UnmarshalText([]byte(s))
	return lv, err
}

// cursor points into the concatenated log: file is identified by the
// fingerprint of its first line (stable when lumberjack renames or
// compresses it), off is the byte offset of the last entry returned; the
// next page continues with the lines before it.
type cursor struct {
	fp  uint64
	off int64
}

func (c cursor) encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1." + strconv.FormatUint(c.fp, 16) + "." + strconv.FormatInt(c.off, 10)))
}

func decodeCursor(s string) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, err
	}
	parts := strings.Split(string(b), ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return cursor{}, errors.New("bad cursor")
	}
	fp, err := strconv.ParseUint(parts[1], 16, 64)
	if err != nil {
		return cursor{}, err
	}
	off, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || off < 0 {
		return cursor{}, errors.New("bad cursor")
	}
	return cursor{fp: fp, off: off}, nil
}

// Read returns the entries matching q, newest first, from the log file and
// its rotated backups (plain or gzip'd), and a cursor for the next (older)
// page, "" when there is none. Paging is by position in the log, so it has
// neither gaps nor duplicates even when the file rotates between pages;
// a cursor into a backup that retention has since deleted ends the paging.
// Invalid queries yield a *QueryError.
func (l *Logger) Read(q Query) ([]Entry, string, error) {
	if err := q.Validate(); err != nil {
		return nil, "", err
	}
	if l.file == "" {
		return nil, "", ErrNoFile
	}
	return readLog(l.file, q)
}

// logFile is one file of the log, newest first.
type logFile struct {
	path    string
	gz      bool
	rotated time.Time // backups: when lumberjack rotated it; zero for the live file
}

const backupTimeFormat = "2006-01-02T15-04-05.000"

// listLogFiles returns the live file (if present) and lumberjack's backups
// of it, newest first. A backup present both plain and gzip'd (compression
// in progress) is listed once, plain.
func listLogFiles(file string) ([]logFile, error) {
	dir := filepath.Dir(file)
	base := filepath.Base(file)
	ext := filepath.Ext(base)
	prefix := base[:len(base)-len(ext)] + "-"

	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []logFile
	backups := map[string]logFile{}
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue
		}
		if name == base {
			out = append(out, logFile{path: filepath.Join(dir, name)})
			continue
		}
		gz := strings.HasSuffix(name, ".gz")
		plain := strings.TrimSuffix(name, ".gz")
		if !strings.HasPrefix(plain, prefix) || !strings.HasSuffix(plain, ext) {
			continue
		}
		ts := plain[len(prefix) : len(plain)-len(ext)]
		t, err := time.Parse(backupTimeFormat, ts)
		if err != nil {
			continue
		}
		if prev, ok := backups[plain]; ok && !prev.gz {
			continue
		}
		backups[plain] = logFile{path: filepath.Join(dir, name), gz: gz, rotated: t}
	}
	bs := make([]logFile, 0, len(backups))
	for _, b := range backups {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool {
		if !bs[i].rotated.Equal(bs[j].rotated) {
			return bs[i].rotated.After(bs[j].rotated)
		}
		return bs[i].path > bs[j].path
	})
	return append(out, bs...), nil
}

// openedFile is one file of a snapshot: held open, so that a rename or
// removal by lumberjack does not change what this Read sees.
type openedFile struct {
	logFile
	fh   *os.File
	size int64 // plain: size when opened; the live file may grow past it

	data   []byte // gzip: decompressed content, loaded on first use
	loaded bool

	fp            uint64
	fpOK, fpKnown bool
}

func openLogFile(f logFile) (*openedFile, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	return &openedFile{logFile: f, fh: fh, size: st.Size()}, nil
}

func (o *openedFile) close() { o.fh.Close() }

// content returns the (decompressed) bytes of the file as a ReaderAt and
// their length.
func (o *openedFile) content() (io.ReaderAt, int64, error) {
	if !o.gz {
		return o.fh, o.size, nil
	}
	if !o.loaded {
		zr, err := gzip.NewReader(io.NewSectionReader(o.fh, 0, o.size))
		if err != nil {
			return nil, 0, err
		}
		data, err := io.ReadAll(io.LimitReader(zr, maxGzipBytes))
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, err
		}
		// A truncated archive (compression in progress) still yields its
		// complete lines.
		o.data, o.loaded = data, true
	}
	return bytes.NewReader(o.data), int64(len(o.data)), nil
}

// fingerprint identifies a file by its first line (at most its first
// 4 KiB), which neither rotation nor compression changes. ok is false while
// the file has no complete first line.
func (o *openedFile) fingerprint() (uint64, bool) {
	if o.fpKnown {
		return o.fp, o.fpOK
	}
	o.fpKnown = true
	const n = 4096
	var r io.Reader = io.NewSectionReader(o.fh, 0, o.size)
	if o.gz {
		if o.loaded {
			r = bytes.NewReader(o.data)
		} else {
			zr, err := gzip.NewReader(r)
			if err != nil {
				return 0, false
			}
			r = zr
		}
	}
	head := make([]byte, n)
	got, _ := io.ReadFull(r, head)
	head = head[:got]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	} else if got < n {
		return 0, false // no complete first line yet
	}
	h := fnv.New64a()
	h.Write(head)
	o.fp, o.fpOK = h.Sum64(), true
	return o.fp, true
}

// snapshot opens every file of the log. It lists the directory again after
// opening and retries if a rotation or removal happened in between, so the
// files held form one consistent sequence.
func snapshot(file string) ([]*openedFile, error) {
	for attempt := 0; ; attempt++ {
		files, err := listLogFiles(file)
		if err != nil {
			return nil, err
		}
		opened := make([]*openedFile, 0, len(files))
		stable := true
		for _, f := range files {
			o, err := openLogFile(f)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					stable = false
					continue
				}
				closeAll(opened)
				return nil, err
			}
			opened = append(opened, o)
		}
		if stable {
			again, err := listLogFiles(file)
			if err != nil {
				closeAll(opened)
				return nil, err
			}
			stable = sameFiles(files, again)
		}
		if stable || attempt == 4 {
			return opened, nil
		}
		closeAll(opened)
	}
}

func sameFiles(a, b []logFile) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].path != b[i].path {
			return false
		}
	}
	return true
}

func closeAll(fs []*openedFile) {
	for _, f := range fs {
		f.close()
	}
}

// match is an entry with its position, for the cursor.
type match struct {
	e    Entry
	file *openedFile
	off  int64
}

func readLog(file string, q Query) ([]Entry, string, error) {
	files, err := snapshot(file)
	if err != nil {
		return nil, "", err
	}
	defer closeAll(files)

	startIdx, end := 0, int64(-1)
	if q.Before != "" {
		c, err := decodeCursor(q.Before)
		if err != nil {
			return nil, "", &QueryError{Field: "before", Message: "is not a cursor returned by this API"}
		}
		startIdx = -1
		for i, o := range files {
			if fp, ok := o.fingerprint(); ok && fp == c.fp {
				startIdx, end = i, c.off
				break
			}
		}
		if startIdx < 0 {
			// The page's file is gone (retention), and with it everything
			// older: the end of the log.
			return nil, "", nil
		}
	}

	matches := q.Matcher()
	qLower := strings.ToLower(q.Q)
	prefilterQ := qLower != "" && rawSearchable(qLower)
	var jobIDBytes []byte
	if q.JobID != "" {
		jobIDBytes = []byte(q.JobID)
	}
	stopBefore := time.Time{}
	if !q.Since.IsZero() {
		stopBefore = q.Since.Add(-sinceSlack)
	}

	want := q.Limit + 1 // one extra tells whether there is a next page
	var got []match
scan:
	for i := startIdx; i < len(files); i++ {
		o := files[i]
		if !stopBefore.IsZero() && !o.rotated.IsZero() && o.rotated.Before(stopBefore) {
			break // this backup and all older ones predate Since
		}
		r, size, err := o.content()
		if err != nil {
			return nil, "", err
		}
		fileEnd := size
		if i == startIdx && end >= 0 && end < size {
			fileEnd = end
		}
		rl := newRevLines(r, fileEnd)
		for {
			line, off, ok := rl.next()
			if !ok {
				break
			}
			if jobIDBytes != nil && !bytes.Contains(line, jobIDBytes) {
				continue
			}
			if prefilterQ && !containsFoldASCII(line, qLower) {
				continue
			}
			e, ok := parseEntry(line)
			if !ok {
				continue
			}
			if !stopBefore.IsZero() && !e.Time.IsZero() && e.Time.Before(stopBefore) {
				break scan
			}
			if !q.Since.IsZero() && e.Time.Before(q.Since) {
				continue
			}
			if !matches(e) {
				continue
			}
			got = append(got, match{e: e, file: o, off: off})
			if len(got) == want {
				break scan
			}
		}
		if rl.err != nil {
			return nil, "", rl.err
		}
	}

	next := ""
	if len(got) > q.Limit {
		got = got[:q.Limit]
		last := got[len(got)-1]
		if fp, ok := last.file.fingerprint(); ok {
			next = cursor{fp: fp, off: last.off}.encode()
		}
	}
	out := make([]Entry, len(got))
	for i, m := range got {
		out[i] = m.e
	}
	return out, next, nil
}

// Matcher returns q's level, job and text filters as one test for an
// entry (Since and the cursor are the reader's business), for the reader
// and the live tail alike. q must have been validated.
func (q Query) Matcher() func(Entry) bool {
	var minLevel slog.Level
	if q.Level != "" {
		minLevel, _ = parseLevel(q.Level)
	}
	qLower := strings.ToLower(q.Q)
	return func(e Entry) bool {
		return (q.Level == "" || entryLevel(e.Level) >= minLevel) &&
			(q.JobID == "" || strings.EqualFold(e.JobID, q.JobID)) &&
			(qLower == "" || entryContains(e, qLower))
	}
}

func entryLevel(s string) slog.Level {
	lv, err := parseLevel(s)
	if err != nil {
		return slog.LevelInfo
	}
	return lv
}

// rawSearchable reports whether q appears verbatim in a JSON line whenever
// it appears in a decoded value (no characters JSON would escape).
func rawSearchable(q string) bool {
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// containsFoldASCII reports whether lowerNeedle (ASCII, lower case) occurs
// in s ignoring ASCII case.
func containsFoldASCII(s []byte, lowerNeedle string) bool {
	n := len(lowerNeedle)
	if n == 0 {
		return true
	}
	first := lowerNeedle[0]
	for i := 0; i+n <= len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != first {
			continue
		}
		j := 1
		for ; j < n; j++ {
			d := s[i+j]
			if 'A' <= d && d <= 'Z' {
				d += 'a' - 'A'
			}
			if d != lowerNeedle[j] {
				break
			}
		}
		if j == n {
			return true
		}
	}
	return false
}

// entryContains: q (lower case) in the message, the lifted fields, or any
// attribute key or value.
func entryContains(e Entry, q string) bool {
	for _, s := range []string{e.Msg, e.Component, e.JobID, e.WorkerID, e.Type, e.Queue, e.Error} {
		if strings.Contains(strings.ToLower(s), q) {
			return true
		}
	}
	return valueContains(e.Attrs, q)
}

func valueContains(v any, q string) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, fv := range t {
			if strings.Contains(strings.ToLower(k), q) || valueContains(fv, q) {
				return true
			}
		}
	case []any:
		for _, ev := range t {
			if valueContains(ev, q) {
				return true
			}
		}
	case string:
		return strings.Contains(strings.ToLower(t), q)
	case json.Number:
		return strings.Contains(string(t), q)
	case bool:
		return strings.Contains(strconv.FormatBool(t), q)
	}
	return false
}

// parseEntry decodes one JSON log line. Lines that are not a JSON object
// with a msg or level are rejected.
func parseEntry(line []byte) (Entry, bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' {
		return Entry{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return Entry{}, false
	}
	_, hasMsg := m[slog.MessageKey]
	_, hasLevel := m[slog.LevelKey]
	if !hasMsg && !hasLevel {
		return Entry{}, false
	}
	var e Entry
	if s, ok := m[slog.TimeKey].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			e.Time = t
			delete(m, slog.TimeKey)
		}
	}
	e.Level = takeString(m, slog.LevelKey)
	e.Msg = takeString(m, slog.MessageKey)
	e.Component = takeString(m, "component")
	e.JobID = takeString(m, "job_id")
	e.WorkerID = takeString(m, "worker_id")
	e.Type = takeString(m, "type")
	e.Queue = takeString(m, "queue")
	e.Error = takeString(m, "error")
	if len(m) > 0 {
		e.Attrs = m
	}
	e.Raw = append(json.RawMessage(nil), line...)
	return e, true
}

// takeString removes key from m and returns it as text (non-strings in
// their JSON form).
func takeString(m map[string]any, key string) string {
	v, ok := m[key]
	if !ok {
		return ""
	}
	delete(m, key)
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return ""
	case json.Number:
		return t.String()
	default:
		b, _ := json.Marshal(t)
		return string(b)
	}
}

// revLines yields the complete lines of r[0:end) from the last to the
// first, with their start offsets. A trailing partial line (a write in
// progress) is ignored, and lines longer than MaxLineBytes are skipped
// without being held in memory.
type revLines struct {
	r    io.ReaderAt
	lo   int64  // file offset of buf[0]
	buf  []byte // r[lo : lo+len(buf)]; ends with '\n' unless trim is set
	trim bool   // bytes after the last '\n' in buf are to be dropped
	err  error
}

const readChunk = 64 << 10

func newRevLines(r io.ReaderAt, end int64) *revLines {
	return &revLines{r: r, lo: end, trim: true}
}

func (rl *revLines) next() (line []byte, start int64, ok bool) {
	for rl.err == nil {
		if rl.trim {
			if i := bytes.LastIndexByte(rl.buf, '\n'); i >= 0 {
				rl.buf, rl.trim = rl.buf[:i+1], false
				continue
			}
			// No newline yet: everything buffered belongs to the partial
			// (or overlong) line; drop it and read further back.
			rl.buf = rl.buf[:0]
			if rl.lo == 0 || !rl.fill() {
				return nil, 0, false
			}
			continue
		}
		if len(rl.buf) == 0 {
			if rl.lo == 0 || !rl.fill() {
				return nil, 0, false
			}
			continue
		}
		body := rl.buf[:len(rl.buf)-1]
		i := bytes.LastIndexByte(body, '\n')
		if i >= 0 || rl.lo == 0 {
			line, start = body[i+1:], rl.lo+int64(i+1)
			rl.buf = rl.buf[:i+1]
			if len(line) > MaxLineBytes {
				continue
			}
			return line, start, true
		}
		if len(body) > MaxLineBytes {
			// Overlong line: forget it and look for the previous newline.
			rl.buf, rl.trim = rl.buf[:0], true
			if !rl.fill() {
				return nil, 0, false
			}
			continue
		}
		if !rl.fill() {
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// fill prepends up to readChunk bytes from before lo to buf.
func (rl *revLines) fill() bool {
	n := min(int64(readChunk), rl.lo)
	if n == 0 {
		return false
	}
	b := make([]byte, int(n)+len(rl.buf))
	got, err := rl.r.ReadAt(b[:n], rl.lo-n)
	if int64(got) < n {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		rl.err = err
		return false
	}
	copy(b[n:], rl.buf)
	rl.buf = b
	rl.lo -= n
	return true
}
