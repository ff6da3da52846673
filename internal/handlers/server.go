package handlers

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// typeCatalog is the job types enqueues may name (*domain.Catalog), made
// current for a request's types before they are checked.
type typeCatalog interface {
	jobs.TypeSource
	Prepare(ctx context.Context, jobType, queue string)
	// Reload reads the types served elsewhere again unless it did within
	// maxAge.
	Reload(ctx context.Context, maxAge time.Duration)
}

// registryTypes is a typeCatalog of the registry's types alone.
type registryTypes struct{ *jobs.Registry }

// Prepare does nothing: the registry's types are known from the start.
func (registryTypes) Prepare(context.Context, string, string) {}

// Reload does nothing, for the same reason.
func (registryTypes) Reload(context.Context, time.Duration) {}

// server carries the dependencies of every route. Each area reads storage
// through its own interface (store.go), all of them the one Store.
type server struct {
	disk           diskWatcher // nil when the store cannot say (handlers/unavailable.go)
	statusStore    StatusStore
	jobStore       JobStore
	batchStore     BatchStore
	durable        DurableStore
	jobActionStore JobActionStore
	dlqStore       DLQStore
	queueStore     QueueStore
	scheduleStore  ScheduleStore
	settingsStore  SettingsStore
	typeStore      TypeStore

	registry   *jobs.Registry
	types      typeCatalog
	logger     *slog.Logger
	clock      jobs.Clock
	wake       func(string)
	stats      *cached[*domain.Stats]
	overview   *cached[views.Overview]
	settings   *domain.SettingsHolder
	broker     *Broker
	base       context.Context
	workers    func(ctx context.Context) ([]domain.WorkerInfo, error)
	redis      func() string
	dash       DashboardStore
	sessions   *sessionManager
	mailURL    string
	bench      BenchmarkFunc
	logs       LogSource
	auditStore AuditStore
	alerts     AlertStore
	alertTest  AlertTester
	live       *liveTopics
	access     AccessStore
	keyUse     *keyUsage
	work       *workAPI
	pushGuard  *domain.GuardedClient
	proxies    []netip.Prefix
}

// newServer builds the server of cfg, whose defaults are filled in.
func newServer(cfg Config, store Store, registry *jobs.Registry, logger *slog.Logger) *server {
	s := &server{
		statusStore:    store,
		jobStore:       store,
		batchStore:     store,
		durable:        store,
		jobActionStore: store,
		dlqStore:       store,
		queueStore:     store,
		scheduleStore:  store,
		settingsStore:  store,
		typeStore:      store,

		registry:   registry,
		types:      registryTypes{registry},
		logger:     logger,
		clock:      cfg.Clock,
		wake:       cfg.Wake,
		stats:      &cached[*domain.Stats]{ttl: countsTTL},
		overview:   &cached[views.Overview]{ttl: countsTTL},
		settings:   cfg.Settings,
		broker:     cfg.Broker,
		base:       cfg.BaseContext,
		workers:    cfg.Workers,
		redis:      cfg.RedisState,
		dash:       cfg.Dashboard,
		mailURL:    cfg.MailURL,
		bench:      cfg.Benchmark,
		logs:       cfg.Logs,
		auditStore: cfg.Audit,
		alerts:     cfg.Alerts,
		alertTest:  cfg.AlertTest,
		live:       newLiveTopics(),
		access:     cfg.Access,
		keyUse:     newKeyUsage(),
		pushGuard:  pushGuard(cfg.HTTPAllow, logger),
		proxies:    cfg.TrustedProxies,
	}
	if cfg.Types != nil {
		s.types = cfg.Types
	}
	if d, ok := store.(diskWatcher); ok {
		s.disk = d
	}
	if cfg.Work != nil {
		wc := *cfg.Work
		wc.fill()
		s.work = &workAPI{cfg: wc}
	}
	if cfg.Dashboard != nil {
		s.sessions = newSessionManager(cfg.Session, cfg.Dashboard)
		s.sessions.limit.now = s.clock.Now
	}
	return s
}

// pushGuard is the client that checks push URLs against the SSRF guard,
// opened by allow (FLINT_HTTP_ALLOW).
func pushGuard(allow []string, logger *slog.Logger) *domain.GuardedClient {
	guard, err := domain.NewGuardedClient(allow, 0)
	if err != nil { // the configuration checked the list: a programming error
		logger.Error("push URLs: the allow list does not parse; allowing none", "component", "http", "error", err)
		guard, _ = domain.NewGuardedClient(nil, 0)
	}
	return guard
}
