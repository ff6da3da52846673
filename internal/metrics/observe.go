package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Tee returns an event sink that observes every event (ObserveEvents) and
// then passes it on to next (which may be nil). Wrap the sink given to the
// store with it so that every change this process commits is counted once.
func (m *Metrics) Tee(next domain.EventSink) domain.EventSink { return tee{m: m, next: next} }

type tee struct {
	m    *Metrics
	next domain.EventSink
}

// Rescored passes aging re-scores on to the next sink (the Redis ready
// queue); they are not events and are not counted.
func (t tee) Rescored(moved []domain.Moved) {
	if r, ok := t.next.(interface{ Rescored([]domain.Moved) }); ok {
		r.Rescored(moved)
	}
}

func (t tee) Publish(events []domain.Event) {
	t.m.ObserveEvents(events)
	if t.next != nil {
		t.next.Publish(events)
	}
}

// ObserveEvents counts committed state changes; see the package
// documentation for the rules and their limits. Events with a zero time
// (ready-queue re-scores after aging, not state changes) are ignored.
func (m *Metrics) ObserveEvents(events []domain.Event) {
	// Consecutive events usually share type and queue: reuse the child.
	var (
		lastEnq    key2
		lastEnqC   prometheus.Counter
		lastPick   string
		lastPickO  prometheus.Observer
		lastFin    key3
		lastFinC   prometheus.Counter
		finOutcome string
	)
	for i := range events {
		e := &events[i]
		if e.At.IsZero() {
			continue
		}
		finOutcome = ""
		switch e.Status {
		case jobs.StateQueued:
			if e.Attempt == 0 {
				if k := (key2{e.Type, e.Queue}); lastEnqC == nil || k != lastEnq {
					lastEnq, lastEnqC = k, m.enqueued.get(k)
				}
				lastEnqC.Inc()
			}
		case jobs.StateClaimed, jobs.StateRunning: // a claim's event carries RunAt; a start's does not
			if e.RunAt.IsZero() {
				continue
			}
			if lastPickO == nil || e.Queue != lastPick {
				lastPick, lastPickO = e.Queue, m.pickup.get(e.Queue)
			}
			lastPickO.Observe(max(e.At.Sub(e.RunAt), 0).Seconds())
		case jobs.StateCompleted:
			finOutcome = FinishedSucceeded
		case jobs.StateDeadLetter:
			finOutcome = FinishedDeadLetter
		case jobs.StateCancelled:
			finOutcome = FinishedCancelled
		case jobs.StateScheduled:
			if e.Attempt > 0 {
				finOutcome = FinishedRetried
			}
		}
		if finOutcome != "" {
			if k := (key3{e.Type, e.Queue, finOutcome}); lastFinC == nil || k != lastFin {
				lastFin, lastFinC = k, m.finished.get(k)
			}
			lastFinC.Inc()
		}
	}
}

// ObserveRun records one finished handler run: its type, how it ended
// (succeeded, failed, cancelled or interrupted; anything else is recorded as
// "other") and how long the handler ran.
func (m *Metrics) ObserveRun(jobType string, outcome domain.Outcome, d time.Duration) {
	o := string(outcome)
	switch outcome {
	case domain.OutcomeSucceeded, domain.OutcomeFailed, domain.OutcomeCancelled, domain.OutcomeInterrupted:
	default:
		o = "other"
	}
	m.duration.get(key2{jobType, o}).Observe(max(d, 0).Seconds())
}

// ObserveReaped counts the reaper's moves: each is an expired lease, counted
// by target state; jobs returned to queued also count as
// finished{outcome="interrupted"}. Lease-lost entries (empty status) are
// ignored.
func (m *Metrics) ObserveReaped(moved []domain.Moved) {
	for i := range moved {
		mv := &moved[i]
		if mv.LeaseLost() {
			continue
		}
		m.leaseExpiries.Inc()
		m.reaperMoved.get(string(mv.Status)).Inc()
		if mv.Status == jobs.StateQueued {
			m.finished.get(key3{mv.Type, mv.Queue, FinishedInterrupted}).Inc()
		}
	}
}

// ObservePromoted counts jobs the promoter moved from scheduled to queued.
func (m *Metrics) ObservePromoted(n int) {
	if n > 0 {
		m.promoted.Add(float64(n))
	}
}
