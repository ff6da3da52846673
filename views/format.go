package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
	"flint/logs"
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
	case jobs.StateRunning:
		return "▶"
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
func OutcomeGlyph(o jobs.Outcome) string {
	switch o {
	case jobs.OutcomeSucceeded:
		return "✓"
	case jobs.OutcomeFailed:
		return "✕"
	case jobs.OutcomeInterrupted:
		return "↯"
	case jobs.OutcomeCancelled:
		return "⊘"
	case jobs.OutcomeRunning:
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

// PrettyJSON indents a JSON document for display; invalid JSON comes back
// as is. The result is text: templ escapes it where it is shown.
func PrettyJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}

// ShortID is the last eight hex digits of a UUID, enough to tell jobs apart
// on screen. (Ids are UUIDv7: their first digits are a timestamp, the same
// for jobs created together; the last ones are random.)
func ShortID(id uuid.UUID) string { return jobs.ShortID(id) }

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
		fmt.Fprintf(&b, "%s=%v", k, attrs[k])
	}
	return b.String()
}
