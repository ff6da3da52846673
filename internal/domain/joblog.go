package domain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// LogEntry is one line of a job's own log: what its handler logged through
// Logger, or a lifecycle line of Flint's.
type LogEntry struct {
	JobID   uuid.UUID      `json:"job_id"`
	Seq     int64          `json:"seq"`
	Attempt int            `json:"attempt"`
	At      time.Time      `json:"at"`
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Attrs   map[string]any `json:"attrs,omitempty"`
	// Source is "handler" for what the job's handler logged, "flint" for
	// the lifecycle lines Flint derives from its runs (Seq 0).
	Source string `json:"source"`
}

// MaxJobLogLines caps what one attempt of a job stores in its log; one
// line says when later ones are dropped.
const MaxJobLogLines = 1000

// MaxJobLogTotal caps what a job stores in its log over all its attempts
// (up to 101 of them, and interrupted runs besides); past it, one last
// line counts the lines dropped.
const MaxJobLogTotal = 5000

// Log sources.
const (
	LogFromHandler = "handler"
	LogFromFlint   = "flint"
)

// LifecycleLines are Flint's own lines in a job's log — claimed, and how
// each attempt ended (succeeded, failed and when it will be retried, timed
// out, interrupted, cancelled), and a cancel that came while the job
// waited — derived from its runs (execs, in order, the running one
// included) and its row rather than stored, so the hot path writes nothing
// for them. cancel is the operator's action on the audit trail that
// cancelled the job, if any (a cancel, or its series paused or deleted).
func LifecycleLines(j *jobs.Job, execs []Execution, cancel *AuditEntry) []LogEntry {
	var out []LogEntry
	line := func(at time.Time, attempt int, level, format string, args ...any) {
		out = append(out, LogEntry{JobID: j.ID, Attempt: attempt, At: at, Level: level, Source: LogFromFlint,
			Message: fmt.Sprintf(format, args...)})
	}
	for i, e := range execs {
		line(e.StartedAt, e.Attempt, "info", "Claimed by worker %s (attempt %d of %d).", e.WorkerID, e.Attempt, j.MaxRetries+1)
		if e.FinishedAt == nil || e.Outcome == OutcomeRunning {
			continue
		}
		at, last := *e.FinishedAt, i == len(execs)-1
		// ended says the job ended with this run (rather than later,
		// while it waited).
		ended := last && j.FinishedAt != nil && j.FinishedAt.Equal(at)
		took := at.Sub(e.StartedAt).Round(time.Millisecond)
		reason := ""
		if e.Error != nil {
			reason = Truncate(FirstLine(*e.Error), 300)
		}
		switch e.Outcome {
		case OutcomeSucceeded:
			line(at, e.Attempt, "info", "Succeeded in %s.", took)
		case OutcomeCancelled:
			line(at, e.Attempt, "warn", "Cancelled after %s: %s", took, reason)
		case OutcomeInterrupted:
			if ended && j.Status == jobs.StateCancelled {
				line(at, e.Attempt, "warn", "Interrupted after %s (%s); not run again: a cancel was requested.", took, reason)
				break
			}
			line(at, e.Attempt, "warn", "Interrupted after %s (%s); the job was queued again.", took, reason)
		case OutcomeFailed:
			what := "Failed"
			if strings.HasPrefix(reason, "timed out") {
				what = "Timed out"
			}
			switch {
			case !last && execs[i+1].Attempt <= e.Attempt:
				// The next run counts attempts afresh: this failure sent the
				// job to the dead-letter queue, and it was replayed from there.
				line(at, e.Attempt, "error", "%s after %s: %s. Moved to the dead-letter queue.", what, took, reason)
			case !last:
				line(at, e.Attempt, "error", "%s after %s: %s. Retried.", what, took, reason)
			case (j.Status == jobs.StateScheduled || j.Status == jobs.StateQueued) && j.DeletedAt == nil && j.Attempt <= j.MaxRetries:
				line(at, e.Attempt, "error", "%s after %s: %s. Will retry at %s (attempt %d of %d).", what, took, reason,
					j.RunAt.UTC().Format(time.RFC3339), j.Attempt+1, j.MaxRetries+1)
			case j.Status == jobs.StateDeadLetter:
				line(at, e.Attempt, "error", "%s after %s: %s. Moved to the dead-letter queue.", what, took, reason)
			case j.Status == jobs.StateCancelled && ended:
				line(at, e.Attempt, "error", "%s after %s: %s. Not retried: a cancel was requested.", what, took, reason)
			default:
				line(at, e.Attempt, "error", "%s after %s: %s.", what, took, reason)
			}
		}
	}
	if l, ok := cancelledWhileWaiting(j, execs, cancel); ok {
		out = append(out, l)
	}
	return out
}

// cancelledWhileWaiting is the line of a job cancelled while it waited
// (before it ran, or between runs): its runs do not say so.
func cancelledWhileWaiting(j *jobs.Job, execs []Execution, cancel *AuditEntry) (LogEntry, bool) {
	if j.Status != jobs.StateCancelled || j.FinishedAt == nil {
		return LogEntry{}, false
	}
	if n := len(execs); n > 0 && (execs[n-1].FinishedAt == nil || !j.FinishedAt.After(*execs[n-1].FinishedAt)) {
		return LogEntry{}, false // the last run ended it, and its line says how
	}
	when := "Cancelled while it waited to run again"
	if len(execs) == 0 {
		when = "Cancelled before it ran"
	}
	var msg string
	switch how := SeriesCancel(j, cancel); {
	case j.CancelledBy != nil && j.LastError != nil:
		msg = fmt.Sprintf("%s: %s.", when, strings.TrimPrefix(*j.LastError, "cancelled: "))
	case how != "":
		msg = fmt.Sprintf("%s: its recurring series was %s", when, how)
		if cancel != nil {
			msg += fmt.Sprintf(" by %s (%s)", cancel.Actor, cancel.Source)
		}
		msg += "."
	case cancel != nil:
		msg = fmt.Sprintf("%s, by %s (%s).", when, cancel.Actor, cancel.Source)
	default:
		msg = when + "."
	}
	return LogEntry{JobID: j.ID, Attempt: j.Attempt, At: *j.FinishedAt, Level: "warn", Source: LogFromFlint, Message: msg}, true
}

// MergeLog puts lifecycle lines and stored handler lines in time order;
// at the same instant a lifecycle line comes first, stored lines keep
// their order.
func MergeLog(lifecycle, stored []LogEntry) []LogEntry {
	out := make([]LogEntry, 0, len(lifecycle)+len(stored))
	out = append(out, lifecycle...)
	for _, l := range stored {
		l.Source = cmp.Or(l.Source, LogFromHandler)
		out = append(out, l)
	}
	slices.SortStableFunc(out, func(a, b LogEntry) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(sourceRank(a.Source), sourceRank(b.Source))
	})
	return out
}

func sourceRank(s string) int {
	if s == LogFromFlint {
		return 0
	}
	return 1
}
