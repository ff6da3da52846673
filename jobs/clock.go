package jobs

import (
	"sync"
	"time"
)

// Clock tells the time. Production uses SystemClock; tests use a FakeClock.
// Decisions that several processes must agree on (leases, due times) are made
// on the database clock instead; Clock serves in-process timing.
//
// One rule, in every package: "what time is it" (a timestamp to record, a
// due time to compare, the promoter's reckoning of the database clock)
// asks the Clock that app passes to handlers, workers and scheduler alike.
// Durations and deadlines that belong to the runtime — time.Since for a
// log line, a context deadline, a timer to sleep on — use the time package,
// whose monotonic clock a fake one cannot drive.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// SystemClock is the real wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// FakeClock is a Clock that moves only when told to. Safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock set to t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the fake time forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
