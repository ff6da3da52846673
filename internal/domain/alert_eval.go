package domain

import (
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
)

// AlertFinding is one subject for which a rule's condition holds now.
type AlertFinding struct {
	Subject string
	Value   float64
	Message string
}

// AlertFacts is what the rules are evaluated against, read from the
// database in one pass.
type AlertFacts struct {
	Now time.Time
	// Failures holds, per rule id of a failure_rate rule, the runs per
	// type in that rule's window.
	Failures map[int64][]TypeRuns
	// Waiting is, per queue with waiting (queued) jobs, how many and since
	// when the oldest has been due.
	Waiting []QueueWaiting
	// Suspended is, per queue with jobs that sleep or wait for a signal or
	// an event, how many and since when the longest has waited.
	Suspended []QueueWaiting
	// Overdue are the unpaused series whose next occurrence is past due.
	Overdue []OverdueSeries
	// ServedQueues are the queues live workers take from; AllQueues is
	// true when some live worker takes from every queue.
	ServedQueues map[string]bool
	AllQueues    bool
}

// TypeRuns is a type's finished runs in a window.
type TypeRuns struct {
	Type   string
	Runs   int64 // succeeded + failed
	Failed int64
}

// QueueWaiting summarises the jobs waiting in one queue.
type QueueWaiting struct {
	Queue  string
	Count  int64
	Oldest time.Time // the earliest run_at among them
}

// OverdueSeries is a recurring series whose next occurrence has not been
// released on time.
type OverdueSeries struct {
	ID      uuid.UUID
	Type    string
	Due     time.Time
	Summary string // its rule: a cron expression or an interval
}

// Evaluate returns the subjects for which the rule's condition holds.
func (r *AlertRule) Evaluate(f *AlertFacts) []AlertFinding {
	var out []AlertFinding
	switch r.Kind {
	case AlertFailureRate:
		for _, t := range f.Failures[r.ID] {
			if t.Runs < int64(r.MinRuns) || t.Runs == 0 {
				continue
			}
			rate := float64(t.Failed) / float64(t.Runs)
			if rate > r.Threshold {
				out = append(out, AlertFinding{Subject: t.Type, Value: rate, Message: fmt.Sprintf(
					"%s: %d of %d runs failed (%s) in the last %s; the threshold is %s",
					t.Type, t.Failed, t.Runs, Percent(rate), Seconds(r.windowMinutes()*60), Percent(r.Threshold))})
			}
		}
	case AlertQueueLatency:
		out = append(out, r.oldestOver(f.Waiting, f.Now, "the oldest of %s has waited %s")...)
	case AlertJobWaiting:
		out = append(out, r.oldestOver(f.Suspended, f.Now, "the longest of %s has slept or waited for a signal or event for %s")...)
	case AlertCronOverdue:
		for _, s := range f.Overdue {
			if r.Series != nil && s.ID != *r.Series {
				continue
			}
			late := f.Now.Sub(s.Due).Seconds()
			if late > float64(r.GraceSeconds) {
				out = append(out, AlertFinding{Subject: s.ID.String(), Value: math.Floor(late), Message: fmt.Sprintf(
					"recurring %s (%s, series %s) was due at %s and is %s overdue; is a scheduler running?",
					s.Type, s.Summary, s.ID, s.Due.UTC().Format("2006-01-02 15:04:05 UTC"), Seconds(int(late)))})
			}
		}
	case AlertNoWorker:
		if f.AllQueues {
			return nil
		}
		for _, q := range f.Waiting {
			if (r.Queue != "" && q.Queue != r.Queue) || f.ServedQueues[q.Queue] {
				continue
			}
			age := f.Now.Sub(q.Oldest).Seconds()
			if age > float64(r.GraceSeconds) {
				out = append(out, AlertFinding{Subject: q.Queue, Value: float64(q.Count), Message: fmt.Sprintf(
					"queue %s: %s waiting (the oldest for %s) and no live worker serves this queue",
					q.Queue, plural(int(q.Count), "1 job is", fmt.Sprintf("%d jobs are", q.Count)), Seconds(int(age)))})
			}
		}
	}
	return out
}

// oldestOver finds the queues (of r's, or all) whose oldest job in qs has
// been there longer than r's threshold in seconds; what says it, with the
// count and the age.
func (r AlertRule) oldestOver(qs []QueueWaiting, now time.Time, what string) []AlertFinding {
	var out []AlertFinding
	for _, q := range qs {
		if r.Queue != "" && q.Queue != r.Queue {
			continue
		}
		age := now.Sub(q.Oldest).Seconds()
		if age > r.Threshold {
			out = append(out, AlertFinding{Subject: q.Queue, Value: math.Floor(age), Message: fmt.Sprintf(
				"queue %s: "+what+"; the threshold is %s",
				q.Queue, unitCount(int(q.Count), "waiting job"), Seconds(int(age)), Seconds(int(r.Threshold)))})
		}
	}
	return out
}
