package domain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
)

func explainQueued(f ExplainFacts) []Reason {
	j := f.Job
	var rs []Reason
	switch {
	case f.AheadCapped:
		rs = append(rs, Reason{Code: "queue_position", Approximate: true, Message: fmt.Sprintf(
			"Queued in %q behind more than %d jobs that come first in claim order (priority, then run time).", j.Queue, f.Ahead)})
	case f.Ahead == 0:
		rs = append(rs, Reason{Code: "queue_position", Approximate: true, Message: fmt.Sprintf(
			"Queued in %q and next in claim order: the next free worker serving it takes it.", j.Queue)})
	default:
		rs = append(rs, Reason{Code: "queue_position", Approximate: true, Message: fmt.Sprintf(
			"Queued in %q behind about %d %s that come first in claim order (priority, then run time).",
			j.Queue, f.Ahead, plural(f.Ahead, "job", "jobs"))})
	}
	if flow := explainFlow(f); len(flow) > 0 {
		rs = append(flow, rs...)
	}
	if f.Queue != nil && f.Queue.Settings.Push != nil {
		return append(explainPush(f), rs...) // the pusher delivers it: no worker needed
	}
	if len(f.Workers) == 0 {
		rs = append([]Reason{{Code: "no_live_worker",
			Message: "No worker process is alive: nothing claims jobs until one starts (flint worker or flint serve)."}}, rs...)
		return rs
	}
	var queues []string
	for _, w := range f.Workers {
		if len(w.Queues) == 0 || slices.Contains(w.Queues, j.Queue) {
			return rs
		}
		queues = append(queues, w.Queues...)
	}
	slices.Sort(queues)
	queues = slices.Compact(queues)
	rs = append([]Reason{{Code: "no_worker_for_queue", Message: fmt.Sprintf(
		"No live worker serves queue %q (the %d alive serve only %s).", j.Queue, len(f.Workers), strings.Join(queues, ", "))}}, rs...)
	return rs
}

// explainPush says where a push queue's job goes, and what holds its
// queue's pushes back.
func explainPush(f ExplainFacts) []Reason {
	j, t := f.Job, f.Queue.Settings.Push
	var rs []Reason
	switch {
	case t.PausedAt != nil:
		rs = append(rs, reasonAt("push_paused", *t.PausedAt,
			"Queue %q pushes its jobs to %s, which answered 410 Gone at %s (%s): nothing is pushed until an admin sets the push again.",
			j.Queue, RedactURL(t.URL), stamp(*t.PausedAt), t.PausedReason))
	case t.HeldUntil != nil && t.HeldUntil.After(f.Now):
		rs = append(rs, reasonAt("push_held", *t.HeldUntil,
			"Queue %q pushes its jobs to %s, which asked Flint to wait (429 or 503): pushes resume at %s (in %s).",
			j.Queue, RedactURL(t.URL), stamp(*t.HeldUntil), t.HeldUntil.Sub(f.Now).Round(time.Second)))
	default:
		rs = append(rs, Reason{Code: "push_queue", Message: fmt.Sprintf(
			"Queue %q pushes its jobs to %s: a worker process's pusher POSTs it there when its turn comes.", j.Queue, RedactURL(t.URL))})
	}
	if len(f.Workers) == 0 {
		rs = append(rs, Reason{Code: "no_live_worker",
			Message: "No worker process is alive: pushes go out from worker processes (flint worker or flint serve), none of which runs now."})
	}
	return rs
}

// explainNoHandler says when none of the live workers that serve a waiting
// job's queue has a handler for its type, as their heartbeats report it.
// Workers claim only the types they serve, so the job waits until one
// that does starts. With no live worker for the queue there is nothing
// to compare (the queued reasons say so), a worker that reports no types
// may run any, and a push queue's jobs need no handler.
func explainNoHandler(f ExplainFacts) (Reason, bool) {
	j := f.Job
	if j.Status != jobs.StateQueued && j.Status != jobs.StateScheduled && j.Status != jobs.StateBlocked {
		return Reason{}, false
	}
	if f.Queue != nil && f.Queue.Settings.Push != nil {
		return Reason{}, false
	}
	var serving int
	var types []string
	for _, w := range f.Workers {
		if len(w.Queues) > 0 && !slices.Contains(w.Queues, j.Queue) {
			continue
		}
		if len(w.Types) == 0 || slices.Contains(w.Types, j.Type) {
			return Reason{}, false
		}
		serving++
		types = append(types, w.Types...)
	}
	if serving == 0 {
		return Reason{}, false
	}
	slices.Sort(types)
	types = slices.Compact(types)
	known := strings.Join(types, ", ")
	if len(types) > 12 {
		known = strings.Join(types[:12], ", ") + fmt.Sprintf(" and %d more", len(types)-12)
	}
	who := fmt.Sprintf("the %d workers serving it handle only %s", serving, known)
	if serving == 1 {
		who = "the worker serving it handles only " + known
	}
	return Reason{Code: "no_worker_for_type", Message: fmt.Sprintf(
		"No live worker serving queue %q runs type %q (%s). Workers take only the types they have handlers for, "+
			"so it waits until a worker that runs %q starts: a program of your own with its handler, or a remote worker that registers it.",
		j.Queue, j.Type, who, j.Type)}, true
}

// explainFlow says which of its queue's flow control holds a queued job
// back: a pause, the queue's concurrency, its rate limit, its key's limit.
func explainFlow(f ExplainFacts) []Reason {
	q := f.Queue
	if q == nil {
		return nil
	}
	j, st := f.Job, q.Settings
	var rs []Reason
	if st.Paused {
		at := st.UpdatedAt
		rs = append(rs, Reason{Code: "queue_paused", At: &at, Message: fmt.Sprintf(
			"Queue %q is paused (by %s at %s): no process claims from it until it is resumed.", j.Queue, st.UpdatedBy, stamp(at))})
	}
	if st.Concurrency != nil && q.Running >= *st.Concurrency {
		rs = append(rs, Reason{Code: "concurrency_limit", Message: fmt.Sprintf(
			"Queue %q is at its concurrency limit: %d of %d jobs running. The next slot opens when one of them ends (or, if its worker died, when the reaper returns it).",
			j.Queue, q.Running, *st.Concurrency)})
	}
	if st.RateLimit != nil && q.Tokens < 1 {
		r := Reason{Code: "rate_limit", Message: fmt.Sprintf(
			"Queue %q is at its rate limit of %s: the next start is allowed", j.Queue, st.RateLimit)}
		if q.NextTokenAt != nil {
			r.At = q.NextTokenAt
			r.Message += fmt.Sprintf(" at %s (in %s).", stamp(*q.NextTokenAt), q.NextTokenAt.Sub(f.Now).Round(time.Millisecond))
		} else {
			r.Message += " in moments."
		}
		rs = append(rs, r)
	}
	if st.PerKeyConcurrency != nil && j.ConcurrencyKey != nil && q.KeyRunning >= *st.PerKeyConcurrency {
		rs = append(rs, Reason{Code: "key_limit", Message: fmt.Sprintf(
			"Its concurrency key %q has %d of %d jobs running in queue %q; it runs when one of them ends.",
			jobs.TruncateBytes(*j.ConcurrencyKey, 80, "…"), q.KeyRunning, *st.PerKeyConcurrency, j.Queue)})
	}
	return rs
}
