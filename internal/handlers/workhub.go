package handlers

import (
	"context"
	"slices"
	"sync"
	"time"
)

// WorkHub holds the long polls of remote workers while they wait for
// work: a waiting claim is a goroutine blocked on a channel, holding no
// PostgreSQL connection, so a thousand idle workers cost the database
// nothing. It wakes them on the notifications the in-process pools use
// (a queue gained queued jobs) and, as a backstop for a notification
// lost while the listener reconnected, every poll interval.
//
// A wake-up does not stampede: of the workers waiting with one set of
// queues and types (a fleet of identical workers), it wakes the one that
// has waited longest; if that worker's claim comes back full, more work
// may be waiting and it wakes the next (Chain). Workers that serve other
// queues or types are woken apart, one per set.
//
// Claims themselves take one of a bounded number of slots, so that
// remote workers, however many, never occupy more than a few of the API
// process's connections.
type WorkHub struct {
	mu      sync.Mutex
	waiting []*waiter // oldest first
	slots   chan struct{}
}

type waiter struct {
	worker string          // the worker's id
	queues map[string]bool // nil: every queue
	sig    string          // the worker's queues and types
	wake   chan struct{}   // cap 1
}

// NewWorkHub returns a hub that lets at most claims remote claims run at
// once; claims < 1 means 8.
func NewWorkHub(claims int) *WorkHub {
	if claims < 1 {
		claims = 8
	}
	return &WorkHub{slots: make(chan struct{}, claims)}
}

// Wake tells the hub that queue ("" for any or unknown) gained queued
// jobs: one waiting worker of each set that serves it tries to claim.
func (h *WorkHub) Wake(queue string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	woken := map[string]bool{}
	for _, w := range h.waiting {
		if woken[w.sig] || (queue != "" && w.queues != nil && !w.queues[queue]) {
			continue
		}
		if signal1(w.wake) {
			woken[w.sig] = true
		}
	}
}

// chain wakes one more waiter of the set sig: a claim came back full.
func (h *WorkHub) chain(sig string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiting {
		if w.sig == sig && signal1(w.wake) {
			return
		}
	}
}

// Kick ends the waits of one worker: it was deregistered, or asked to
// quiet down or terminate, and must look at its state again.
func (h *WorkHub) Kick(worker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.waiting {
		if w.worker == worker {
			signal1(w.wake)
		}
	}
}

// Waiting returns how many workers wait for work.
func (h *WorkHub) Waiting() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiting)
}

// signal1 sends on a one-slot channel without blocking; it reports
// whether the signal is new (the waiter had none pending).
func signal1(ch chan struct{}) bool {
	select {
	case ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// waitFor blocks until the worker is woken (or kicked), d passes or ctx
// ends; it reports whether it was woken. Waiters queue oldest first.
// sig names the worker's set (hubSig).
func (h *WorkHub) waitFor(ctx context.Context, worker, sig string, queues []string, d time.Duration) bool {
	w := &waiter{worker: worker, sig: sig, wake: make(chan struct{}, 1)}
	if len(queues) > 0 {
		w.queues = make(map[string]bool, len(queues))
		for _, q := range queues {
			w.queues[q] = true
		}
	}
	h.mu.Lock()
	h.waiting = append(h.waiting, w)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if i := slices.Index(h.waiting, w); i >= 0 {
			h.waiting = slices.Delete(h.waiting, i, i+1)
		}
		h.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.wake:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// claimSlot takes one of the claim slots, waiting for one while ctx
// allows; release gives it back.
func (h *WorkHub) claimSlot(ctx context.Context) (release func(), err error) {
	select {
	case h.slots <- struct{}{}:
		return func() { <-h.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Run wakes one waiter of each set every interval, until ctx is done: the
// backstop for notifications lost while the listener reconnected.
func (h *WorkHub) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Wake("")
		}
	}
}
