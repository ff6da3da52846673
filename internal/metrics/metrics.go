package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	tables    *tableCollector // nil until SetTableSource
}

type key2 struct{ a, b string }

type key3 struct{ a, b, c string }

// New returns metrics for a process of the given version, with the Go and
// process collectors registered.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg}
	vecs := newJobVecs()
	m.newCounters()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "flint_build_info",
		Help:        "Always 1; the version label names the running build.",
		ConstLabels: prometheus.Labels{"version": version},
	})
	buildInfo.Set(1)
	m.capFamilies(vecs)
	m.newCollectors()

	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		vecs.enqueued, vecs.finished, vecs.duration, vecs.pickup, vecs.reaperMoved,
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

// jobVecs are the labelled job families as registered; Metrics reaches
// their children through capped families (capFamilies).
type jobVecs struct {
	enqueued, finished, reaperMoved *prometheus.CounterVec
	duration, pickup                *prometheus.HistogramVec
}

// newJobVecs makes the labelled job families, unregistered.
func newJobVecs() jobVecs {
	return jobVecs{
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flint_jobs_enqueued_total",
			Help: "Jobs that became due (queued) with no attempt charged yet, by type and queue; see the package documentation for the exact rule.",
		}, []string{"type", "queue"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flint_jobs_finished_total",
			Help: "Job-level outcomes by type, queue and outcome: succeeded, cancelled, dead_letter and retried (a failed attempt with retries left) from state changes, interrupted from the reaper.",
		}, []string{"type", "queue", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flint_job_duration_seconds",
			Help:    "Handler run time by job type and run outcome.",
			Buckets: durationBuckets,
		}, []string{"type", "outcome"}),
		pickup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flint_job_pickup_latency_seconds",
			Help:    "Time from a job becoming due (run_at) to its claim, by queue.",
			Buckets: pickupBuckets,
		}, []string{"queue"}),
		reaperMoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flint_reaper_moved_total",
			Help: "Jobs the reaper moved after their lease expired, by the state it moved them to.",
		}, []string{"to_state"}),
	}
}

// newCounters makes the unlabelled counters.
func (m *Metrics) newCounters() {
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
}

// capFamilies puts each labelled family behind a family that caps its
// series at MaxSeriesPerFamily; past the cap, the labels that can grow
// without bound (type, queue, state) read OtherLabel.
func (m *Metrics) capFamilies(v jobVecs) {
	m.enqueued = newFamily(func(k key2) prometheus.Counter { return v.enqueued.WithLabelValues(clean(k.a), clean(k.b)) },
		func(key2) key2 { return key2{OtherLabel, OtherLabel} })
	m.finished = newFamily(func(k key3) prometheus.Counter {
		return v.finished.WithLabelValues(clean(k.a), clean(k.b), clean(k.c))
	}, func(k key3) key3 { return key3{OtherLabel, OtherLabel, k.c} })
	m.duration = newFamily(func(k key2) prometheus.Observer { return v.duration.WithLabelValues(clean(k.a), clean(k.b)) },
		func(k key2) key2 { return key2{OtherLabel, k.b} })
	m.pickup = newFamily(func(q string) prometheus.Observer { return v.pickup.WithLabelValues(clean(q)) },
		func(string) string { return OtherLabel })
	m.reaperMoved = newFamily(func(s string) prometheus.Counter { return v.reaperMoved.WithLabelValues(clean(s)) },
		func(string) string { return OtherLabel })
}

// newCollectors makes the collectors that read callbacks at scrape time:
// flint_jobs (set by SetStateSource) and flint_redis_up (SetRedisState).
func (m *Metrics) newCollectors() {
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

// errorLog sends the HTTP handler's errors to the default logger.
type errorLog struct{}

func (errorLog) Println(v ...any) {
	slog.Default().Warn("metrics: "+strings.TrimSpace(fmt.Sprintln(v...)), "component", "metrics")
}
