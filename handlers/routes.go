package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/google/uuid"

	"flint/jobs"
	"flint/views"
)

// Store is what the HTTP layer needs from storage; *db.Store implements it.
type Store interface {
	Ping(ctx context.Context) error
	Enqueue(ctx context.Context, params ...jobs.EnqueueParams) ([]jobs.Enqueued, error)
	GetJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	GetJobs(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	ListExecutions(ctx context.Context, j *jobs.Job) ([]jobs.Execution, error)
	ListJobs(ctx context.Context, p jobs.ListParams) (jobs.Page, error)
	CancelJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	RetryJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	DeleteJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	RestoreJob(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	PurgeJob(ctx context.Context, id uuid.UUID) error
	RetryDLQ(ctx context.Context, ids []uuid.UUID) ([]*jobs.Job, error)
	Stats(ctx context.Context) (*jobs.Stats, error)
	Dependencies(ctx context.Context, id uuid.UUID) (jobs.Dependencies, error)
	ExplainFacts(ctx context.Context, id uuid.UUID) (jobs.ExplainFacts, error)
	ExplainFactsFor(ctx context.Context, j *jobs.Job) (jobs.ExplainFacts, error)
	JobLogs(ctx context.Context, id uuid.UUID, after int64, limit int) ([]jobs.LogEntry, error)
	CancelAudit(ctx context.Context, id uuid.UUID) (*jobs.AuditEntry, error)
	EditAndReplay(ctx context.Context, id uuid.UUID, payload json.RawMessage, by jobs.AuditEntry) (json.RawMessage, *jobs.Job, error)
	GetSettings(ctx context.Context) (jobs.Settings, error)
	UpdateSettings(ctx context.Context, patch map[string]json.RawMessage, by string) (jobs.Settings, []string, error)
	ListSettingsChanges(ctx context.Context, limit int) ([]jobs.SettingChange, error)
	ListSchedules(ctx context.Context) ([]*jobs.Schedule, error)
	ListQueues(ctx context.Context) ([]jobs.QueueInfo, error)
	GetQueue(ctx context.Context, name string) (jobs.QueueInfo, error)
	UpdateQueue(ctx context.Context, queue, by string, change func(jobs.QueueSettings) jobs.QueueSettings) (jobs.QueueSettings, error)
	GetSchedule(ctx context.Context, id uuid.UUID) (*jobs.Schedule, error)
	PauseSchedule(ctx context.Context, id uuid.UUID) (*jobs.Schedule, []uuid.UUID, error)
	ResumeSchedule(ctx context.Context, id uuid.UUID) (*jobs.Schedule, error)
	RunScheduleNow(ctx context.Context, id uuid.UUID) (*jobs.Job, error)
	DeleteSchedule(ctx context.Context, id uuid.UUID) ([]uuid.UUID, error)
}

// Config configures the HTTP server.
type Config struct {
	// APIKey is the bootstrap key (FLINT_API_KEY): it opens /api/v1 with
	// every scope. Services get keys of their own through Access. Required.
	APIKey string
	// BaseContext is the parent of every request context; nil means
	// context.Background().
	BaseContext context.Context
	// RequestTimeout bounds each request; zero means 30 s.
	RequestTimeout time.Duration
	// BodyLimit caps request bodies; zero means 16 MiB.
	BodyLimit int
	// Wake, if set, is told which queue gained queued jobs, so an
	// in-process worker pool claims at once.
	Wake func(queue string)
	// Clock tells the time for validation; nil means the system clock.
	Clock jobs.Clock
	// Settings holds the runtime settings this process has loaded; nil
	// means the defaults.
	Settings *jobs.SettingsHolder
	// Broker streams job events to SSE clients; nil means a broker that
	// receives nothing (no events configured).
	Broker *Broker
	// Workers lists the worker registry; nil means an empty list.
	Workers func(ctx context.Context) ([]jobs.WorkerInfo, error)
	// RedisState reports the Redis fast path for /healthz: "ok", "down"
	// or "disabled"; nil means disabled.
	RedisState func() string
	// Dashboard, when set, serves the HTML dashboard with its own store
	// needs; nil serves the JSON API only.
	Dashboard DashboardStore
	// Session configures dashboard sessions.
	Session SessionConfig
	// MailURL is the mail catcher's web UI, linked from the dashboard.
	MailURL string
	// Benchmark runs the scheduler benchmark; nil disables it.
	Benchmark BenchmarkFunc
	// Metrics serves /metrics (outside the API key; it has its own token).
	Metrics http.Handler
	// Logs reads the log entries every Flint process stored; nil disables
	// the log API and page.
	Logs LogSource
	// Audit records operator actions; nil records nothing.
	Audit AuditStore
	// Alerts keeps alert rules and their history; nil disables the alert
	// API and page.
	Alerts AlertStore
	// AlertTest sends a rule's test notification; nil means the rule's
	// "send test" answers that this process cannot send.
	AlertTest AlertTester
	// Access stores people and API keys; nil means the bootstrap key
	// (APIKey) is the only key, and no Users or Keys pages.
	Access AccessStore
}

// server carries the dependencies of every route.
type server struct {
	store      Store
	registry   *jobs.Registry
	logger     *slog.Logger
	clock      jobs.Clock
	wake       func(string)
	stats      *cached[*jobs.Stats]
	overview   *cached[views.Overview]
	settings   *jobs.SettingsHolder
	broker     *Broker
	base       context.Context
	workers    func(ctx context.Context) ([]jobs.WorkerInfo, error)
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
}

// New builds the Fiber app with every route.
func New(cfg Config, store Store, registry *jobs.Registry, logger *slog.Logger) *fiber.App {
	s := &server{
		store:    store,
		registry: registry,
		logger:   logger,
		clock:    cmp.Or[jobs.Clock](cfg.Clock, jobs.SystemClock{}),
		wake:     cfg.Wake,
		stats:    &cached[*jobs.Stats]{ttl: countsTTL},
		overview: &cached[views.Overview]{ttl: countsTTL},
		settings: cfg.Settings,
		live:     newLiveTopics(),
	}
	if s.settings == nil {
		s.settings = &jobs.SettingsHolder{}
	}
	base := cfg.BaseContext
	if base == nil {
		base = context.Background()
	}
	s.base = base
	s.broker = cfg.Broker
	if s.broker == nil {
		s.broker = NewBroker(16)
	}
	s.workers = cfg.Workers
	if s.workers == nil {
		s.workers = func(context.Context) ([]jobs.WorkerInfo, error) { return []jobs.WorkerInfo{}, nil }
	}
	s.redis = cfg.RedisState
	if s.redis == nil {
		s.redis = func() string { return "disabled" }
	}
	s.dash, s.mailURL, s.bench, s.logs, s.auditStore = cfg.Dashboard, cfg.MailURL, cfg.Benchmark, cfg.Logs, cfg.Audit
	s.access, s.keyUse = cfg.Access, newKeyUsage()
	s.alerts, s.alertTest = cfg.Alerts, cfg.AlertTest
	if s.alertTest == nil {
		s.alertTest = func(context.Context, jobs.AlertRule) []jobs.AlertDelivery {
			return []jobs.AlertDelivery{{Channel: "all", Error: "this Flint process has no mailer or webhook client configured"}}
		}
	}
	if s.access != nil {
		go s.recordKeyUse(base)
	}
	if cfg.Dashboard != nil {
		go s.watchTopics(base)
	}
	app := fiber.New(fiber.Config{
		AppName:               "Flint",
		ErrorHandler:          ErrorHandler(logger),
		BodyLimit:             cmp.Or(cfg.BodyLimit, 16<<20),
		Immutable:             true, // values read from a request stay valid after it
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		ReadBufferSize:        16 << 10, // request line and headers: a page asks for up to 100 rows by id
		// No write timeout: SSE responses stream for as long as the client
		// stays; each stream notices a gone client on its next flush.
		IdleTimeout: 120 * time.Second,
	})
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		logger.Error("panic in request", "component", "http", "path", c.Path(), "error", e)
	}}))
	app.Use(requestContext(base, cmp.Or(cfg.RequestTimeout, 30*time.Second)))

	app.Get("/healthz", s.healthz)
	app.Get("/readyz", s.readyz)
	if cfg.Metrics != nil {
		// The adaptor hands net/http the fasthttp request as its context;
		// a context derived from that one reads the server's shutdown state
		// unsynchronised (a data race at shutdown), so the metrics handler
		// gets one that is never cancelled instead. It answers in moments.
		metricsHandler := cfg.Metrics
		app.Get("/metrics", adaptor.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			metricsHandler.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
		})))
	}

	// The API's documentation is public; it is registered before the key
	// check so that the check never runs for it.
	app.Get("/api/v1/docs", securityHeaders(false), s.apiDocsPage)
	app.Get("/api/v1/openapi.json", s.openAPIJSON)
	app.Get("/favicon.ico", favicon)
	if cfg.Dashboard == nil {
		app.Use("/static", staticFiles())
	}

	// Every API route needs a key, and the scope accessTable names for it.
	api := guarded{Router: app.Group("/api/v1", s.authenticateKey(cfg.APIKey)), check: s.authorize}
	api.Post("/jobs", s.enqueue)
	api.Post("/jobs/batch", s.enqueueBatch)
	api.Post("/workflows", s.enqueueWorkflow)
	api.Get("/jobs", s.listJobs)
	api.Get("/jobs/:id", s.getJob)
	api.Get("/jobs/:id/explain", s.explainJob)
	api.Get("/jobs/:id/logs", s.jobLogs)
	api.Post("/jobs/:id/replay", s.replayJob)
	api.Post("/jobs/:id/cancel", s.jobActionAPI(jobCancel))
	api.Post("/jobs/:id/retry", s.jobActionAPI(jobRetry))
	api.Post("/jobs/:id/restore", s.jobActionAPI(jobRestore))
	api.Delete("/jobs/:id", s.deleteJob)
	api.Get("/dlq", s.listDLQ)
	api.Post("/dlq/retry", s.retryDLQ)
	api.Get("/bin", s.listBin)
	api.Get("/stats", s.getStats)
	api.Get("/workers", s.listWorkers)
	api.Post("/benchmark/run", s.runBenchmarkAPI)
	if s.logs != nil {
		api.Get("/logs", s.listLogs)
	}
	if s.auditStore != nil {
		api.Get("/audit", s.listAudit)
	}
	api.Get("/sse/events", s.sseEvents)
	api.Get("/recurring", s.listRecurring)
	api.Get("/recurring/:id", s.getRecurring)
	api.Post("/recurring/:id/pause", s.recurringAction(seriesPause))
	api.Post("/recurring/:id/resume", s.recurringAction(seriesResume))
	api.Post("/recurring/:id/run", s.runRecurringNow)
	api.Delete("/recurring/:id", s.deleteRecurring)
	api.Get("/queues", s.listQueues)
	api.Get("/queues/:name", s.getQueue)
	api.Post("/queues/:name/pause", s.pauseQueue(true))
	api.Post("/queues/:name/resume", s.pauseQueue(false))
	api.Patch("/queues/:name", s.patchQueue)
	api.Get("/settings", s.getSettings)
	api.Patch("/settings", s.patchSettings)
	api.Get("/settings/changes", s.listSettingsChanges)
	if s.alerts != nil {
		api.Get("/alerts", s.listAlerts)
		api.Get("/alerts/deliveries", s.listAlertDeliveries)
		api.Get("/alerts/rules", s.listAlertRules)
		api.Post("/alerts/rules", s.createAlertRule)
		api.Get("/alerts/rules/:id", s.getAlertRule)
		api.Patch("/alerts/rules/:id", s.patchAlertRule)
		api.Delete("/alerts/rules/:id", s.deleteAlertRule)
		api.Post("/alerts/rules/:id/test", s.testAlertRule)
	}
	if s.access != nil {
		api.Get("/keys", s.listKeys)
		api.Post("/keys", s.createKey)
		api.Delete("/keys/:id", s.revokeKey)
		api.Post("/keys/:id/rotate", s.rotateKey)
	}
	if cfg.Dashboard != nil {
		s.sessions = newSessionManager(cfg.Session, cfg.Dashboard)
		s.routesHTML(app, cfg.Session.Secure)
	}
	return app
}
