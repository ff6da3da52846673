package domain

import (
	"fmt"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// ExplainFacts is what the database says about a job and its surroundings
// at one moment: the input of Explain. The store gathers it; nothing in it
// is guessed.
type ExplainFacts struct {
	Job *jobs.Job
	// Now is the database clock when the facts were read.
	Now time.Time
	// Upstream are the jobs it depends on, with their states.
	Upstream []DependencyRef
	// Ahead counts the queued jobs before it in its queue's claim order;
	// AheadCapped says the count stopped at its cap.
	Ahead       int
	AheadCapped bool
	// Workers are the worker processes alive now (read for waiting jobs),
	// with the queues they serve and the job types they can run.
	Workers []WorkerInfo
	// CancelledBy is the job whose failure cancelled this one, if any.
	CancelledBy *DependencyRef
	// Cancel is the operator's action on the audit trail that cancelled
	// the job, if any: a cancel, or the pause or deletion of its recurring
	// series.
	Cancel *AuditEntry
	// LastRun is a cancelled job's last execution, if it ever ran.
	LastRun *Execution
	// MaxInterruptions is how many lost leases send a job to the DLQ.
	MaxInterruptions int
	// Queue describes the flow control of a queued job's queue (or of a
	// pending occurrence of a recurring series); nil when the queue is
	// neither paused nor limited.
	Queue *QueueFacts
	// SeriesWaiting counts the occurrences of the job's recurring series
	// that wait in its queue (read when that queue is paused).
	SeriesWaiting int64
}

// Reason is one plain-words answer to "why is this job where it is?",
// with the numbers it rests on.
type Reason struct {
	// Code names the reason for programs: waiting_for_run_at, retry_backoff,
	// due, blocked, queue_position, no_live_worker, no_worker_for_queue,
	// no_worker_for_type, queue_paused, series_queue_paused,
	// concurrency_limit, rate_limit,
	// key_limit, running, lease_expired, cancel_requested, interrupted,
	// completed, dead_letter, cancelled_by_dependency,
	// cancelled_by_operator, cancelled_by_series, cancelled, in_bin.
	Code    string `json:"code"`
	Message string `json:"message"`
	// At is the moment the reason is about (the run time, the lease
	// expiry, the finish), when there is one.
	At *time.Time `json:"at,omitempty"`
	// Jobs are the other jobs it names (dependencies, the failed
	// upstream job).
	Jobs []uuid.UUID `json:"jobs,omitempty"`
	// Approximate marks figures that move while one reads them (a
	// position in a queue).
	Approximate bool `json:"approximate,omitempty"`
}

// Explanation answers "why is this job where it is?".
type Explanation struct {
	JobID   uuid.UUID  `json:"job_id"`
	Status  jobs.State `json:"status"`
	Summary string     `json:"summary"`
	Reasons []Reason   `json:"reasons"`
	// CheckedAt is the database clock when the facts were read.
	CheckedAt time.Time `json:"checked_at"`
}

// Explain turns facts into reasons, most important first.
func Explain(f ExplainFacts) Explanation {
	j := f.Job
	var rs []Reason
	switch {
	case j.DeletedAt != nil:
		rs = append(rs, reasonAt("in_bin", *j.DeletedAt,
			"In the bin since %s (it was %s); restore it to bring it back.", stamp(*j.DeletedAt), j.Status))
	case j.Status == jobs.StateCompleted:
		rs = append(rs, explainCompleted(j))
	case j.Status == jobs.StateDeadLetter:
		rs = append(rs, explainDeadLetter(f))
	case j.Status == jobs.StateCancelled:
		rs = append(rs, explainCancelled(f))
	case j.Status.Leased():
		rs = append(rs, explainRunning(f)...)
	case j.Status == jobs.StateScheduled:
		rs = append(rs, explainScheduled(f))
	case j.Status == jobs.StateWaiting:
		rs = append(rs, explainWaiting(f))
	case j.Status == jobs.StateBlocked:
		rs = append(rs, explainBlocked(f))
	case j.Status == jobs.StateQueued:
		rs = append(rs, explainQueued(f)...)
	}
	if r, ok := explainSeriesPaused(f); ok {
		rs = append(rs, r)
	}
	if j.Interruptions > 0 && j.DeletedAt == nil && !j.Status.Terminal() {
		rs = append(rs, Reason{Code: "interrupted", Message: fmt.Sprintf(
			"Its worker was lost %s (lease expired); after %d it goes to the dead-letter queue.",
			times(j.Interruptions), f.MaxInterruptions)})
	}
	if j.DeletedAt == nil {
		if r, ok := explainNoHandler(f); ok {
			if j.Status == jobs.StateQueued {
				rs = append([]Reason{r}, rs...) // what happens when it is claimed
			} else {
				rs = append(rs, r)
			}
		}
	}
	e := Explanation{JobID: j.ID, Status: j.Status, Reasons: rs, CheckedAt: f.Now}
	if len(rs) > 0 {
		e.Summary = rs[0].Message
	}
	return e
}

func explainCompleted(j *jobs.Job) Reason {
	at := j.UpdatedAt
	if j.FinishedAt != nil {
		at = *j.FinishedAt
	}
	return reasonAt("completed", at, "Completed at %s, on attempt %d of %d.", stamp(at), j.Attempt, j.MaxRetries+1)
}

func explainDeadLetter(f ExplainFacts) Reason {
	j := f.Job
	at := j.UpdatedAt
	if j.FinishedAt != nil {
		at = *j.FinishedAt
	}
	why := fmt.Sprintf("after %d of %d attempts", j.Attempt, j.MaxRetries+1)
	switch {
	case f.MaxInterruptions > 0 && j.Interruptions >= f.MaxInterruptions:
		why = fmt.Sprintf("after its worker was lost %s", times(j.Interruptions))
	case j.Attempt <= j.MaxRetries:
		why = fmt.Sprintf("on attempt %d: the handler said no retry could succeed", j.Attempt)
	}
	msg := fmt.Sprintf("In the dead-letter queue since %s, %s.", stamp(at), why)
	if j.LastError != nil && *j.LastError != "" {
		msg += " Last error: " + jobs.TruncateBytes(*j.LastError, 300, "…")
	}
	return Reason{Code: "dead_letter", Message: msg, At: &at}
}

func explainCancelled(f ExplainFacts) Reason {
	j := f.Job
	at := j.UpdatedAt
	if j.FinishedAt != nil {
		at = *j.FinishedAt
	}
	if f.CancelledBy != nil {
		return Reason{Code: "cancelled_by_dependency", At: &at, Jobs: []uuid.UUID{f.CancelledBy.ID}, Message: fmt.Sprintf(
			"Cancelled at %s because job %s (%s), which it depends on, is %s and will not complete.",
			stamp(at), ShortID(f.CancelledBy.ID), f.CancelledBy.Type, f.CancelledBy.Status)}
	}
	if how := SeriesCancel(j, f.Cancel); how != "" {
		msg := fmt.Sprintf("Cancelled at %s when its recurring series was %s", stamp(at), how)
		if f.Cancel != nil {
			msg += fmt.Sprintf(" by %s (%s)", f.Cancel.Actor, f.Cancel.Source)
		}
		return Reason{Code: "cancelled_by_series", At: &at, Message: msg + "; this occurrence never ran."}
	}
	if f.Cancel != nil {
		return Reason{Code: "cancelled_by_operator", At: &f.Cancel.At, Message: fmt.Sprintf(
			"Cancelled by %s (%s) at %s.", f.Cancel.Actor, f.Cancel.Source, stamp(f.Cancel.At))}
	}
	r := run(f.LastRun)
	switch {
	case r.Outcome == OutcomeCancelled && !j.CancelRequested:
		msg := fmt.Sprintf("Cancelled at %s by its handler, in attempt %d", stamp(at), r.Attempt)
		if r.Error != nil && *r.Error != "" {
			msg += ": " + jobs.TruncateBytes(*r.Error, 300, "…")
		}
		return Reason{Code: "cancelled", Message: msg + ".", At: &at}
	case j.CancelRequested:
		return reasonAt("cancelled", at,
			"Cancelled at %s: a cancel was requested while attempt %d ran, and its worker stopped it (the audit trail does not say who asked).",
			stamp(at), max(r.Attempt, j.Attempt))
	case j.Executions == 0:
		return reasonAt("cancelled", at, "Cancelled at %s before it ever ran (the audit trail does not say by whom).", stamp(at))
	default:
		return reasonAt("cancelled", at,
			"Cancelled at %s while it waited for attempt %d of %d (the audit trail does not say by whom).",
			stamp(at), j.Attempt+1, j.MaxRetries+1)
	}
}

// run is e, or the zero execution.
func run(e *Execution) Execution {
	if e == nil {
		return Execution{}
	}
	return *e
}

// SeriesCancel says how a cancelled job's recurring series cancelled it:
// "paused" or "deleted", or "" when it did not. The audit entry of the
// series action names the job; without one (audit entries are written
// after the action, best effort), the job's own record says it.
func SeriesCancel(j *jobs.Job, audit *AuditEntry) string {
	if audit != nil {
		switch audit.Action {
		case AuditSeriesPause:
			return "paused"
		case AuditSeriesDelete:
			return "deleted"
		}
	}
	if j.Status != jobs.StateCancelled || j.Executions != 0 || j.LastError == nil {
		return ""
	}
	switch *j.LastError {
	case SeriesPausedError:
		return "paused"
	case SeriesDeletedError:
		return "deleted"
	}
	return ""
}

func explainRunning(f ExplainFacts) []Reason {
	j := f.Job
	worker := "an unknown worker"
	if j.WorkerID != nil {
		worker = "worker " + *j.WorkerID
	}
	started := j.UpdatedAt
	if j.StartedAt != nil {
		started = *j.StartedAt
	}
	rs := []Reason{reasonAt("running", started, "Running on %s since %s (attempt %d of %d).",
		worker, stamp(started), j.Attempt, j.MaxRetries+1)}
	if j.Status == jobs.StateClaimed {
		// Claimed at updated_at, which nothing changes while it waits.
		rs[0] = reasonAt("claimed", j.UpdatedAt, "Claimed by %s at %s (attempt %d of %d); it waits in that worker's "+
			"claim-ahead buffer for a free handler slot and has not started.",
			worker, stamp(j.UpdatedAt), j.Attempt, j.MaxRetries+1)
	}
	if j.LeaseExpiresAt != nil {
		exp := *j.LeaseExpiresAt
		if exp.After(f.Now) {
			rs[0].Message += fmt.Sprintf(" Its lease runs until %s (in %s) and is extended while the worker lives.",
				stamp(exp), exp.Sub(f.Now).Round(time.Second))
		} else {
			rs = append(rs, reasonAt("lease_expired", exp,
				"Its lease expired %s ago (at %s): the worker is gone or stuck, and the reaper will queue the job again.",
				f.Now.Sub(exp).Round(time.Second), stamp(exp)))
		}
	}
	if j.CancelRequested {
		rs = append(rs, Reason{Code: "cancel_requested",
			Message: "A cancel was requested: the worker stops the handler at its next heartbeat."})
	}
	return rs
}

func explainScheduled(f ExplainFacts) Reason {
	j := f.Job
	if !j.RunAt.After(f.Now) {
		return reasonAt("due", j.RunAt, "Due since %s; the scheduler moves it to its queue within moments.", stamp(j.RunAt))
	}
	in := j.RunAt.Sub(f.Now).Round(time.Second)
	if j.Attempt > 0 && j.LastError != nil {
		return reasonAt("retry_backoff", j.RunAt, "Attempt %d of %d failed; retry %d runs at %s (in %s). Error: %s",
			j.Attempt, j.MaxRetries+1, j.Attempt+1, stamp(j.RunAt), in, jobs.TruncateBytes(*j.LastError, 300, "…"))
	}
	if j.ScheduleID != nil && f.Queue != nil && f.Queue.Settings.Paused {
		return reasonAt("waiting_for_run_at", j.RunAt, "The next occurrence of a recurring series; it goes to its queue at %s (in %s), where it waits: the queue is paused.",
			stamp(j.RunAt), in)
	}
	if j.ScheduleID != nil {
		return reasonAt("waiting_for_run_at", j.RunAt, "The next occurrence of a recurring series; it runs at %s (in %s).",
			stamp(j.RunAt), in)
	}
	return reasonAt("waiting_for_run_at", j.RunAt, "Waiting for its run time, %s (in %s).", stamp(j.RunAt), in)
}

func explainBlocked(f ExplainFacts) Reason {
	var waiting []string
	var ids []uuid.UUID
	for _, d := range f.Upstream {
		if d.Status == jobs.StateCompleted {
			continue
		}
		waiting = append(waiting, fmt.Sprintf("%s (%s) is %s", ShortID(d.ID), d.Type, d.Status))
		ids = append(ids, d.ID)
	}
	if len(waiting) == 0 {
		return Reason{Code: "blocked", Message: "Blocked, but every dependency has completed: it is being released."}
	}
	return Reason{Code: "blocked", Jobs: ids, Message: fmt.Sprintf("Waiting for %d of %d dependencies: %s.",
		len(waiting), len(f.Upstream), strings.Join(waiting, "; "))}
}

func reasonAt(code string, at time.Time, format string, args ...any) Reason {
	return Reason{Code: code, At: &at, Message: fmt.Sprintf(format, args...)}
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ShortID is the last eight hex digits of an id, as the dashboard shows it
// (the first ones of a UUIDv7 are its timestamp, alike for jobs created
// together).
func ShortID(id uuid.UUID) string { s := id.String(); return s[len(s)-8:] }

// explainSeriesPaused says that an occurrence of a recurring series, queued
// or pending, belongs to a series that goes on releasing occurrences into
// a paused queue, where they pile up unrun.
func explainSeriesPaused(f ExplainFacts) (Reason, bool) {
	j := f.Job
	if j.ScheduleID == nil || j.DeletedAt != nil || (j.Status != jobs.StateQueued && j.Status != jobs.StateScheduled) ||
		f.Queue == nil || !f.Queue.Settings.Paused {
		return Reason{}, false
	}
	return Reason{Code: "series_queue_paused", Message: fmt.Sprintf(
		"Its recurring series is active but its queue %q is paused: the series goes on releasing an occurrence at each time it is due, "+
			"and none runs until the queue is resumed (%s of this series %s in the queue now).",
		j.Queue, plural(int(f.SeriesWaiting), "1 occurrence", fmt.Sprintf("%d occurrences", f.SeriesWaiting)),
		plural(int(f.SeriesWaiting), "waits", "wait"))}, true
}
