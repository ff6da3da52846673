package metrics

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flinthq/flint/jobs"
)

// SetStateSource sets the callback that counts jobs by [state, queue] for
// flint_jobs. It is called at scrape time with a 5 s timeout, at most once
// per 2 s (its answer, or its failure, serves the scrapes in between). On
// failure the scrape has no flint_jobs series and
// flint_metrics_source_errors_total grows. For every queue in the answer,
// each known state without a count is reported as 0, so series do not
// vanish when a state empties.
func (m *Metrics) SetStateSource(src StateSource) { m.states.setSource(src) }

// SetRedisState sets the callback read at scrape time for flint_redis_up:
// "ok" is 1, "down" is 0, and "disabled" (or anything else, or no
// callback) leaves the series out.
func (m *Metrics) SetRedisState(state func() string) {
	if state == nil {
		m.redis.fn.Store(nil)
		return
	}
	m.redis.fn.Store(&state)
}

// SetEventCounters sets the callbacks read at scrape time for
// flint_events_published_total and flint_events_dropped_total (the event
// bus's Published and Dropped). The series appear with the first call;
// later calls replace the callbacks.
func (m *Metrics) SetEventCounters(published, dropped func() uint64) {
	m.eventFns.Store(&[2]func() uint64{published, dropped})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.eventsReg {
		return
	}
	read := func(i int) func() float64 {
		return func() float64 {
			if f := m.eventFns.Load()[i]; f != nil {
				return float64(f())
			}
			return 0
		}
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flint_events_published_total",
			Help: "Job events this process published.",
		}, read(0)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "flint_events_dropped_total",
			Help: "Job events this process dropped because the publisher could not keep up or the transport failed.",
		}, read(1)),
	)
	m.eventsReg = true
}

// SetPoolState sets the callbacks read at scrape time for flint_worker_busy
// (jobs running now) and flint_worker_capacity (jobs the pool runs at
// once). The series appear with the first call; later calls replace the
// callbacks.
func (m *Metrics) SetPoolState(running, capacity func() int) {
	m.poolFns.Store(&[2]func() int{running, capacity})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.poolReg {
		return
	}
	read := func(i int) func() float64 {
		return func() float64 {
			if f := m.poolFns.Load()[i]; f != nil {
				return float64(f())
			}
			return 0
		}
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flint_worker_busy",
			Help: "Jobs this process's worker pool is running.",
		}, read(0)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flint_worker_capacity",
			Help: "Jobs this process's worker pool runs at once.",
		}, read(1)),
	)
	m.poolReg = true
}

// stateCollector reports flint_jobs from a callback, cached.
type stateCollector struct {
	desc    *prometheus.Desc
	errors  prometheus.Counter
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	src     atomic.Pointer[StateSource]

	// mu is held while the source runs, so concurrent scrapes wait for one
	// call instead of each making their own.
	mu      sync.Mutex
	readFor *StateSource // the source the cache was read from
	readAt  time.Time
	counts  map[[2]string]int64 // nil after a failure
}

func (c *stateCollector) setSource(src StateSource) {
	if src == nil {
		c.src.Store(nil)
		return
	}
	c.src.Store(&src)
}

// Describe also describes the error counter, which Collect reports after
// the call so that a scrape shows its own failure.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	c.errors.Describe(ch)
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.read()
	c.errors.Collect(ch)
	if counts == nil {
		return
	}
	queues := map[string]bool{}
	for k, n := range counts {
		queues[k[1]] = true
		c.emit(ch, float64(n), k[0], k[1])
	}
	for q := range queues {
		for _, s := range jobs.States {
			if _, ok := counts[[2]string{string(s), q}]; !ok {
				c.emit(ch, 0, string(s), q)
			}
		}
	}
}

func (c *stateCollector) emit(ch chan<- prometheus.Metric, v float64, state, queue string) {
	if m, err := prometheus.NewConstMetric(c.desc, prometheus.GaugeValue, v, clean(state), clean(queue)); err == nil {
		ch <- m
	}
}

// read returns the cached counts, calling the source when they are older
// than the TTL; nil when there is no source or its last call failed.
func (c *stateCollector) read() map[[2]string]int64 {
	src := c.src.Load()
	if src == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.readFor == src && now.Sub(c.readAt) < c.ttl {
		return c.counts
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := (*src)(ctx)
	if err != nil {
		c.errors.Inc()
		slog.Default().Warn("metrics: counting jobs by state failed; flint_jobs left out of this scrape",
			"component", "metrics", "error", err)
		counts = nil
	} else if counts == nil {
		counts = map[[2]string]int64{}
	}
	c.readFor, c.readAt, c.counts = src, c.now(), counts
	return counts
}

// redisCollector reports flint_redis_up from a callback.
type redisCollector struct {
	desc *prometheus.Desc
	fn   atomic.Pointer[func() string]
}

func (c *redisCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *redisCollector) Collect(ch chan<- prometheus.Metric) {
	fn := c.fn.Load()
	if fn == nil {
		return
	}
	switch (*fn)() {
	case "ok":
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
	case "down":
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 0)
	}
}
