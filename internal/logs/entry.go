package logs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Entry is one structured log record. The well-known keys are lifted out of
// Attrs; everything else (including groups, as nested maps) stays in Attrs.
// ID and the process fields are set once the entry is stored.
type Entry struct {
	ID        int64          `json:"id,omitempty"`
	Time      time.Time      `json:"time"`
	Level     string         `json:"level"`
	Msg       string         `json:"msg"`
	ProcessID string         `json:"process_id,omitempty"`
	Host      string         `json:"host,omitempty"`
	Role      string         `json:"role,omitempty"`
	Component string         `json:"component,omitempty"`
	JobID     string         `json:"job_id,omitempty"`
	WorkerID  string         `json:"worker_id,omitempty"`
	Type      string         `json:"type,omitempty"`
	Queue     string         `json:"queue,omitempty"`
	Error     string         `json:"error,omitempty"`
	Attrs     map[string]any `json:"attrs,omitempty"`
}

// liftedKeys are the attributes an Entry keeps in fields of its own, apart
// from component and job_id, which storage keeps in columns.
var liftedKeys = []string{"worker_id", "type", "queue", "error"}

func (e *Entry) lifted(key string) *string {
	switch key {
	case "worker_id":
		return &e.WorkerID
	case "type":
		return &e.Type
	case "queue":
		return &e.Queue
	case "error":
		return &e.Error
	}
	return nil
}

// LiftAttrs moves the well-known attributes (worker_id, type, queue, error)
// from Attrs into their fields, as read from storage.
func (e *Entry) LiftAttrs() {
	for _, k := range liftedKeys {
		if _, ok := e.Attrs[k]; ok {
			*e.lifted(k) = takeString(e.Attrs, k)
		}
	}
	if len(e.Attrs) == 0 {
		e.Attrs = nil
	}
}

// StoredAttrs returns Attrs with the lifted attributes put back, for
// storage: a new map, Attrs is not changed.
func (e Entry) StoredAttrs() map[string]any {
	out := make(map[string]any, len(e.Attrs)+len(liftedKeys))
	for k, v := range e.Attrs {
		out[k] = v
	}
	for _, k := range liftedKeys {
		if v := *e.lifted(k); v != "" {
			out[k] = v
		}
	}
	return out
}

// Process identifies the Flint process that logged an entry: its
// FLINT_WORKER_ID (as in leases and the workers table), host and role
// (serve, api, worker or scheduler).
type Process struct {
	ID   string `json:"process_id"`
	Host string `json:"host"`
	Role string `json:"role"`
}

// SeenProcess is a process that has entries in the log, with the time of
// its newest.
type SeenProcess struct {
	Process
	Last time.Time `json:"last_at"`
}

// Query selects entries of the log.
type Query struct {
	Level     string    // minimum level: debug, info, warn (warning), error; "" = all
	Process   string    // one process's id; "" = all
	Component string    // exactly this component; "" = all
	JobID     string    // job id (UUID); "" = all
	Q         string    // case-insensitive substring of the message, component, job id or any attribute key or value
	Since     time.Time // entries at or after Since; zero = all
	Until     time.Time // entries before Until; zero = all
	Before    string    // opaque cursor from a previous page; "" = newest
	Limit     int       // 1..MaxLimit; 0 = DefaultLimit
}

// Limits of a Query.
const (
	// DefaultLimit is the page size of a Query whose Limit is zero.
	DefaultLimit = 100
	// MaxLimit is the largest page a Query may ask for.
	MaxLimit = 500
	// MaxLineBytes caps one log line kept for the file and the database;
	// longer records are shortened to their time, level, message,
	// component and job id.
	MaxLineBytes = 64 << 10
	maxQLen      = 256
	maxNameLen   = 200
)

// QueryError reports an invalid Query field (the API answers 422).
type QueryError struct {
	// Field is the query parameter at fault ("level", "limit", "q", ...).
	Field string
	// Message says what is wrong with it.
	Message string
}

// Error returns "field: message".
func (e *QueryError) Error() string { return e.Field + ": " + e.Message }

// Validate checks q and fills in defaults (Limit, canonical Level and
// JobID). It returns a *QueryError.
func (q *Query) Validate() error {
	if q.Level != "" {
		lv, err := ParseLevel(q.Level)
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
	for _, f := range []struct{ name, v string }{{"process", q.Process}, {"component", q.Component}} {
		if len(f.v) > maxNameLen || !plainText(f.v) {
			return &QueryError{Field: f.name, Message: fmt.Sprintf("must be at most %d characters of text without control characters", maxNameLen)}
		}
	}
	if len(q.Q) > maxQLen {
		return &QueryError{Field: "q", Message: fmt.Sprintf("must be at most %d bytes", maxQLen)}
	}
	if !plainText(q.Q) {
		return &QueryError{Field: "q", Message: "must be valid UTF-8 without control characters"}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return &QueryError{Field: "until", Message: "must be later than since"}
	}
	if q.Before != "" {
		if _, err := ParseCursor(q.Before); err != nil {
			return &QueryError{Field: "before", Message: "is not a cursor returned by this API"}
		}
	}
	return nil
}

// MinLevel is the level filter as a slog level (debug when there is none).
// q must have been validated.
func (q Query) MinLevel() slog.Level {
	if q.Level == "" {
		return slog.LevelDebug
	}
	lv, _ := ParseLevel(q.Level)
	return lv
}

func plainText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// ParseLevel accepts debug|info|warn|warning|error in any case (and slog's
// own forms such as "INFO+2").
func ParseLevel(s string) (slog.Level, error) {
	var lv slog.Level
	if strings.EqualFold(s, "warning") {
		s = "warn"
	}
	err := lv.UnmarshalText([]byte(s))
	return lv, err
}

// Cursor is a position in the log, which is ordered newest first by time,
// then by id: a page continues with the entries before it.
type Cursor struct {
	Time time.Time
	ID   int64
}

// String encodes the cursor for the API's next_before.
func (c Cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte("v2." + strconv.FormatInt(c.Time.UnixMicro(), 10) + "." + strconv.FormatInt(c.ID, 10)))
}

// ParseCursor decodes a Cursor.String.
func ParseCursor(s string) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, err
	}
	parts := strings.Split(string(b), ".")
	if len(parts) != 3 || parts[0] != "v2" {
		return Cursor{}, errors.New("bad cursor")
	}
	us, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return Cursor{}, err
	}
	id, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || id < 0 {
		return Cursor{}, errors.New("bad cursor")
	}
	return Cursor{Time: time.UnixMicro(us).UTC(), ID: id}, nil
}

// BeforeCursor returns q.Before decoded; ok is false when q has none. q
// must have been validated.
func (q Query) BeforeCursor() (c Cursor, ok bool) {
	if q.Before == "" {
		return Cursor{}, false
	}
	c, err := ParseCursor(q.Before)
	return c, err == nil
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
	e.Attrs = m
	e.LiftAttrs()
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
