package views

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// StatusGlyph is the symbol shown with a state, so states differ by shape as
// well as colour.
func StatusGlyph(s jobs.State) string {
	switch s {
	case jobs.StateQueued:
		return "○"
	case jobs.StateScheduled:
		return "◷"
	case jobs.StateBlocked:
		return "‖"
	case jobs.StateClaimed:
		return "◔"
	case jobs.StateRunning:
		return "▶"
	case jobs.StateWaiting:
		return "⏸"
	case jobs.StateCompleted:
		return "✓"
	case jobs.StateDeadLetter:
		return "✕"
	case jobs.StateCancelled:
		return "⊘"
	}
	return "·"
}

// StatusLabel is the human name of a state.
func StatusLabel(s jobs.State) string {
	if s == jobs.StateDeadLetter {
		return "dead letter"
	}
	return string(s)
}

// OutcomeGlyph marks an execution's outcome.
func OutcomeGlyph(o domain.Outcome) string {
	switch o {
	case domain.OutcomeSucceeded:
		return "✓"
	case domain.OutcomeFailed:
		return "✕"
	case domain.OutcomeInterrupted:
		return "↯"
	case domain.OutcomeCancelled:
		return "⊘"
	case domain.OutcomeRunning:
		return "▶"
	}
	return "·"
}

// PriorityLabel names a priority.
func PriorityLabel(p int) string {
	switch p {
	case jobs.PriorityHigh:
		return "high"
	case jobs.PriorityMedium:
		return "medium"
	case jobs.PriorityLow:
		return "low"
	}
	return strconv.Itoa(p)
}

// Ago renders how long before now t was ("3m ago", "in 5s").
func Ago(t, now time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + short(-d)
	}
	if d < time.Second {
		return "just now"
	}
	return short(d) + " ago"
}

// AgoPtr is Ago for an optional time; "—" when absent.
func AgoPtr(t *time.Time, now time.Time) string {
	if t == nil {
		return "—"
	}
	return Ago(*t, now)
}

func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// Stamp renders an absolute time in UTC.
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// StampPtr is Stamp for an optional time.
func StampPtr(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return Stamp(*t)
}

// ISO renders a machine-readable time for <time datetime>.
func ISO(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Millis renders a duration given in milliseconds.
func Millis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	default:
		return short(d)
	}
}

// Count renders a count, with "+" when it was capped.
func Count(n int64, capped bool) string {
	s := Thousands(n)
	if capped {
		s += "+"
	}
	return s
}

// Thousands renders n with thin separators.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// ShortID is the last eight hex digits of a UUID, enough to tell jobs apart
// on screen. (Ids are UUIDv7: their first digits are a timestamp, the same
// for jobs created together; the last ones are random.)
func ShortID(id uuid.UUID) string { return domain.ShortID(id) }

// Deref returns *s or "".
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Float renders a float briefly.
func Float(f float64) string {
	if f == math.Trunc(f) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'f', 1, 64)
}

// logAttrs renders an entry's attributes, but its error (shown with the
// message), as key=value text, keys sorted.
func logAttrs(e logs.Entry) string {
	attrs := e.StoredAttrs()
	delete(attrs, "error")
	return attrsText(attrs)
}

func opAnchor(op DocOperation) string {
	r := strings.NewReplacer("/", "-", "{", "", "}", "", ".", "-")
	return strings.ToLower(op.Method) + r.Replace(op.Path)
}

func reqText(required bool) string {
	if required {
		return ", required"
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// attrsText prints a log line's attributes as key=value pairs, keys sorted.
func attrsText(attrs map[string]any) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, attrValue(k, attrs[k]))
	}
	return b.String()
}

// Duration renders a length of time as Ago does ("45s", "3m", "2h 5m").
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return short(d)
}

// Took is how long a run took: milliseconds under a second, tenths of a
// second under a minute, then as Duration.
func Took(d time.Duration) string {
	switch {
	case d < 0:
		return "0 ms"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	default:
		return short(d)
	}
}

// JobsPageSize is how many jobs a page of a jobs list shows.
const JobsPageSize = 50

// workerKind says what a worker is: a Flint process, or a remote worker
// in its language.
func workerKind(w domain.WorkerInfo) string {
	if w.Kind == domain.WorkerRemote {
		if w.Language != "" {
			return "remote · " + w.Language
		}
		return "remote"
	}
	if len(w.Roles) > 0 {
		return "flint · " + strings.Join(w.Roles, ", ")
	}
	return "flint process"
}

// anyRunsWorkers reports whether some entry of the registry runs jobs.
func anyRunsWorkers(ws []domain.WorkerInfo) bool {
	for _, w := range ws {
		if w.RunsWorkers() {
			return true
		}
	}
	return false
}

// workerVersion is the version a worker reported, if any.
func workerVersion(w domain.WorkerInfo) string {
	if w.Version == "" {
		return ""
	}
	return "v" + strings.TrimPrefix(w.Version, "v")
}

// typeSummary lists up to four types and counts the rest.
func typeSummary(types []string) string {
	if len(types) <= 4 {
		return strings.Join(types, ", ")
	}
	return strings.Join(types[:4], ", ") + fmt.Sprintf(" and %d more", len(types)-4)
}

// pushOutcomeClass colours a push's outcome like the job states it leads to.
func pushOutcomeClass(outcome string) string {
	switch outcome {
	case domain.PushCompleted:
		return "st-completed"
	case domain.PushAccepted:
		return "st-running"
	case domain.PushFailed, domain.PushGone:
		return "st-dead_letter"
	}
	return "st-scheduled"
}

// AuditField is one field of an audit entry's details, for reading.
type AuditField struct {
	Key   string // the detail's name
	Value string // its value as text
	// Block marks an object or array, shown as indented JSON.
	Block bool
}

// AuditFields spells an audit entry's details out field by field, in the
// order they were recorded: strings as they are, numbers and booleans as
// written, objects and arrays indented. Details that are not a JSON object
// come back as one field named "details".
func AuditFields(raw json.RawMessage) []AuditField {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return []AuditField{{Key: "details", Value: PrettyJSON(raw), Block: true}}
	}
	var out []AuditField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		f := AuditField{Key: strings.ReplaceAll(key, "_", " ")}
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil:
			f.Value = s
		case len(v) > 0 && (v[0] == '{' || v[0] == '['):
			f.Value, f.Block = PrettyJSON(v), true
		default:
			f.Value = string(v)
		}
		out = append(out, f)
	}
	return out
}

// BusiestQueues are up to n queues with the most jobs waiting or running
// (paused ones among them), for the overview's per-queue summary.
func BusiestQueues(qs []domain.QueueInfo, n int) []domain.QueueInfo {
	out := slices.Clone(qs)
	load := func(q domain.QueueInfo) int64 {
		return q.Counts[jobs.StateQueued] + q.Counts[jobs.StateClaimed] + q.Counts[jobs.StateRunning] + q.Counts[jobs.StateScheduled] + q.Counts[domain.CountRetrying]
	}
	slices.SortStableFunc(out, func(a, b domain.QueueInfo) int {
		if c := cmp.Compare(load(b), load(a)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// Retrying reports whether a job waits for a retry: scheduled after a
// failed attempt. Lists and the overview show it as retrying.
func Retrying(j *jobs.Job) bool { return j.Status == jobs.StateScheduled && j.Attempt > 0 }

// rowStatus is the status a jobs list row shows and filters by.
func rowStatus(j *jobs.Job) string {
	if Retrying(j) {
		return "retrying"
	}
	if j.Status == jobs.StateWaiting && j.WaitingFor != nil && j.WaitingFor.Kind == jobs.WaitSleep {
		return "sleeping"
	}
	return string(j.Status)
}
