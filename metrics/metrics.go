package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"flint/jobs"
)

// MaxSeriesPerFamily caps the label combinations of each labelled family.
// Observations with a new combination beyond the cap are counted under the
// label value OtherLabel instead.
const MaxSeriesPerFamily = 2000

// OtherLabel replaces label values once a family reached MaxSeriesPerFamily.
const OtherLabel = "_other"

// Outcome label values of flint_jobs_finished_total.
const (
	FinishedSucceeded   = "succeeded"
	FinishedCancelled   = "cancelled"
	FinishedInterrupted = "interrupted"
	FinishedDeadLetter  = "dead_letter"
	FinishedRetried     = "retried"
)

const (
	// stateCacheTTL is how long one reading of the state source serves
	// scrapes.
	stateCacheTTL = 2 * time.Second
	// stateTimeout bounds one call of the state source.
	stateTimeout = 5 * time.Second
	// scrapeTimeout bounds one scrape as the HTTP client sees it.
	scrapeTimeout = 15 * time.Second
)

var (
	// durationBuckets span 1 ms to 10 min.
	durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	// pickupBuckets span 0.5 ms to 60 s.
	pickupBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// StateSource counts jobs by state and queue; the key is [state, queue].
type StateSource func(ctx context.Context) (map[[2]string]int64, error)

// Metrics holds Flint's collectors on its own registry (not the global
// default). Its methods are safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	enqueued      *family[key2, prometheus.Counter]  // type, queue
	finished      *family[key3, prometheus.Counter]  // type, queue, outcome
	duration      *family[key2, prometheus.Observer] // type, outcome
	pickup        *family[string, prometheus.Observer]
	reaperMoved   *family[string, prometheus.Counter] // to_state
	leaseExpiries prometheus.Counter
	promoted      prometheus.Counter
	sourceErrors  prometheus.Counter

	states *stateCollector
	redis  *redisCollector

	mu        sync.Mutex // guards the lazy registrations below
	eventFns  atomic.Pointer[[2]func() uint64]
	eventsReg bool
	poolFns   atomic.Pointer[[2]func() int]
	poolReg   bool
}

type key2 struct{ a, b string }

type key3 struct{ a, b, c string }

// New returns metrics for a process of the given version, with the Go and
// process collectors registered.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg}

	enqueued := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flint_jobs_enqueued_total",
		Help: "Jobs that became due (queued) with no attempt charged yet, by type and queue; see the package documentation for the exact rule.",
	}, []string{"type", "queue"})
	finished := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flint_jobs_finished_total",
		Help: "Job-level outcomes by type, queue and outcome: succeeded, cancelled, dead_letter and retried (a failed attempt with retries left) from state changes, interrupted from the reaper.",
	}, []string{"type", "queue", "outcome"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flint_job_duration_seconds",
		Help:    "Handler run time by job type and run outcome.",
		Buckets: durationBuckets,
	}, []string{"type", "outcome"})
	pickup := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flint_job_pickup_latency_seconds",
		Help:    "Time from a job becoming due (run_at) to its claim, by queue.",
		Buckets: pickupBuckets,
	}, []string{"queue"})
	reaperMoved := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flint_reaper_moved_total",
		Help: "Jobs the reaper moved after their lease expired, by the state it moved them to.",
	}, []string{"to_state"})
	m.leaseExpiries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flint_lease_expiries_total",
		Help: "Running jobs whose lease expired and that the reaper took back.",
	})
	m.promoted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flint_promoter_promoted_total",
		Help: "Scheduled jobs the promoter moved to queued.",
	})
	m.sourceErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flint_metrics_source_errors_total",
		Help: "Failed calls of the job count source; the scrape that made the call has no flint_jobs series.",
	})
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "flint_build_info",
		Help:        "Always 1; the version label names the running build.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	buildInfo.Set(1)

	m.enqueued = newFamily(func(k key2) prometheus.Counter { return enqueued.WithLabelValues(clean(k.a), clean(k.b)) },
		func(key2) key2 { return key2{OtherLabel, OtherLabel} })
	m.finished = newFamily(func(k key3) prometheus.Counter {
		return finished.WithLabelValues(clean(k.a), clean(k.b), clean(k.c))
	}, func(k key3) key3 { return key3{OtherLabel, OtherLabel, k.c} })
	m.duration = newFamily(func(k key2) prometheus.Observer { return duration.WithLabelValues(clean(k.a), clean(k.b)) },
		func(k key2) key2 { return key2{OtherLabel, k.b} })
	m.pickup = newFamily(func(q string) prometheus.Observer { return pickup.WithLabelValues(clean(q)) },
		func(string) string { return OtherLabel })
	m.reaperMoved = newFamily(func(s string) prometheus.Counter { return reaperMoved.WithLabelValues(clean(s)) },
		func(string) string { return OtherLabel })

	m.states = &stateCollector{
		desc: prometheus.NewDesc("flint_jobs", "Live (not binned) jobs by state and queue, read from the database at most every 2 s.",
			[]string{"state", "queue"}, nil),
		errors:  m.sourceErrors,
		ttl:     stateCacheTTL,
		timeout: stateTimeout,
		now:     time.Now,
	}
	m.redis = &redisCollector{desc: prometheus.NewDesc("flint_redis_up",
		"1 when Redis answered its last health check, 0 when it is down; absent when Redis is disabled.", nil, nil)}

	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		enqueued, finished, duration, pickup, reaperMoved,
		m.leaseExpiries, m.promoted, buildInfo,
		m.states, m.redis,
	)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            errorLog{},
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		EnableOpenMetrics:   false,
		MaxRequestsInFlight: 4,
		Timeout:             scrapeTimeout,
	})
	return m
}

// Registry returns the registry holding every Flint collector, for tests or
// to add collectors of one's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (OpenMetrics is
// not offered). A collector that fails is logged and left out; the rest of
// the scrape is still served. At most 4 scrapes run at once and a scrape
// that takes longer than 15 s is answered 503.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Protected returns Handler guarded by a bearer token: a request without
// "Authorization: Bearer <token>" is answered 401. An empty token disables
// the check.
func (m *Metrics) Protected(token string) http.Handler {
	if token == "" {
		return m.handler
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(cred)))
		// Compare digests, not tokens: equal lengths, so the comparison
		// time says nothing about the token.
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="flint metrics"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		m.handler.ServeHTTP(w, r)
	})
}

// Tee returns an event sink that observes every event (ObserveEvents) and
// then passes it on to next (which may be nil). Wrap the sink given to the
// store with it so that every change this process commits is counted once.
func (m *Metrics) Tee(next jobs.EventSink) jobs.EventSink { return tee{m: m, next: next} }

type tee struct {
	m    *Metrics
	next jobs.EventSink
}

// Rescored passes aging re-scores on to the next sink (the Redis ready
// queue); they are not events and are not counted.
func (t tee) Rescored(moved []jobs.Moved) {
	if r, ok := t.next.(interface{ Rescored([]jobs.Moved) }); ok {
		r.Rescored(moved)
	}
}

func (t tee) Publish(events []jobs.Event) {
	t.m.ObserveEvents(events)
	if t.next != nil {
		t.next.Publish(events)
	}
}

// ObserveEvents counts committed state changes; see the package
// documentation for the rules and their limits. Events with a zero time
// (ready-queue re-scores after aging, not state changes) are ignored.
func (m *Metrics) ObserveEvents(events []jobs.Event) {
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
		case jobs.StateRunning:
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
func (m *Metrics) ObserveRun(jobType string, outcome jobs.Outcome, d time.Duration) {
	o := string(outcome)
	switch outcome {
	case jobs.OutcomeSucceeded, jobs.OutcomeFailed, jobs.OutcomeCancelled, jobs.OutcomeInterrupted:
	default:
		o = "other"
	}
	m.duration.get(key2{jobType, o}).Observe(max(d, 0).Seconds())
}

// ObserveReaped counts the reaper's moves: each is an expired lease, counted
// by target state; jobs returned to queued also count as
// finished{outcome="interrupted"}. Lease-lost entries (empty status) are
// ignored.
func (m *Metrics) ObserveReaped(moved []jobs.Moved) {
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

// family resolves label tuples to collector children once. Reads are
// lock-free (a copy-on-write map); a new tuple takes the mutex and copies
// the map, which happens a bounded number of times.
type family[K comparable, V any] struct {
	m        atomic.Pointer[map[K]V]
	mu       sync.Mutex
	series   int // distinct children created
	create   func(K) V
	overflow func(K) K
}

// aliasLimit bounds how many over-the-cap tuples are remembered (each
// pointing at its overflow child) so that they too resolve without the lock.
const aliasLimit = 4 * MaxSeriesPerFamily

func newFamily[K comparable, V any](create func(K) V, overflow func(K) K) *family[K, V] {
	f := &family[K, V]{create: create, overflow: overflow}
	empty := map[K]V{}
	f.m.Store(&empty)
	return f
}

func (f *family[K, V]) get(k K) V {
	cur := *f.m.Load()
	if v, ok := cur[k]; ok {
		return v
	}
	if len(cur) >= aliasLimit {
		if v, ok := cur[f.overflow(k)]; ok {
			return v
		}
	}
	return f.add(k)
}

func (f *family[K, V]) add(k K) V {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := *f.m.Load()
	if v, ok := cur[k]; ok {
		return v
	}
	next := make(map[K]V, len(cur)+2)
	maps.Copy(next, cur)
	var v V
	if f.series < MaxSeriesPerFamily {
		v = f.create(k)
		f.series++
	} else {
		ok := false
		o := f.overflow(k)
		if v, ok = cur[o]; !ok {
			v = f.create(o)
			f.series++
			next[o] = v
		}
		if len(cur) >= aliasLimit {
			if !ok {
				f.m.Store(&next)
			}
			return v
		}
	}
	next[k] = v
	f.m.Store(&next)
	return v
}

// clean makes a label value valid UTF-8 (the client library refuses
// anything else).
func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// errorLog sends the HTTP handler's errors to the default logger.
type errorLog struct{}

func (errorLog) Println(v ...any) {
	slog.Default().Warn("metrics: "+strings.TrimSpace(fmt.Sprintln(v...)), "component", "metrics")
}
