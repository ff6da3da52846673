package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// New builds the Fiber app that serves Flint's HTTP surface: the public
// endpoints, the JSON API under /api/v1 and, when cfg.Dashboard is set,
// the dashboard. The caller serves it (app.Listener) and stops it with
// app.ShutdownWithTimeout.
//
// New also starts the loops some routes rely on (see background): they
// run until cfg.BaseContext is done, and the app's shutdown stops them and
// waits for them.
func New(cfg Config, store Store, registry *jobs.Registry, logger *slog.Logger) *fiber.App {
	cfg = cfg.withDefaults()
	s := newServer(cfg, store, registry, logger)
	app := fiber.New(fiberConfig(cfg, logger))
	s.useMiddleware(app, cfg.RequestTimeout)
	s.routesPublic(app, cfg)
	s.routesAPI(app, cfg.APIKey)
	if cfg.Dashboard != nil {
		s.routesHTML(app, cfg.Session.Secure)
	}
	s.startBackground(app)
	return app
}

// useMiddleware installs what runs before every route: panic recovery, the
// request's context (from the server's base context, with timeout) and
// the client's address.
func (s *server) useMiddleware(app *fiber.App, timeout time.Duration) {
	app.Use(recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: func(c *fiber.Ctx, e any) {
		s.logger.Error("panic in request", "component", "http", "path", c.Path(), "error", e)
	}}))
	app.Use(requestContext(s.base, timeout))
	app.Use(func(c *fiber.Ctx) error {
		c.Locals(clientIPKey, s.clientIP(c))
		return c.Next()
	})
}

// routesPublic registers the routes that need no credentials (each is in
// publicRoutes): health, metrics (its own token), the API's documentation
// and the static files.
func (s *server) routesPublic(app *fiber.App, cfg Config) {
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
}

// routesAPI registers the JSON API. Every route needs a key (the bootstrap
// apiKey or a stored one) with the scope accessTable names for it; the
// routes of an area whose store is not configured are left out.
func (s *server) routesAPI(app *fiber.App, apiKey string) {
	api := guarded{Router: app.Group("/api/v1", s.authenticateKey(apiKey), traceContext), check: s.authorize}
	s.routesAPIJobs(api)
	s.routesAPIWorkers(api)
	s.routesAPIOperations(api)
	if s.alerts != nil {
		s.routesAPIAlerts(api)
	}
	if s.access != nil {
		api.Get("/keys", s.listKeys)
		api.Post("/keys", s.createKey)
		api.Delete("/keys/:id", s.revokeKey)
		api.Post("/keys/:id/rotate", s.rotateKey)
	}
}

// routesAPIJobs registers enqueueing, the jobs, the dead-letter queue, the
// bin and the counts.
func (s *server) routesAPIJobs(api guarded) {
	api.Post("/jobs", s.enqueue)
	api.Post("/jobs/batch", s.enqueueBatch)
	api.Post("/workflows", s.enqueueWorkflow)
	api.Post("/batches", s.createBatch)
	api.Get("/batches", s.listBatches)
	api.Get("/batches/:id", s.getBatch)
	api.Post("/batches/:id/jobs", s.addToBatch)
	api.Post("/batches/:id/close", s.closeBatch)
	api.Get("/jobs", s.listJobs)
	api.Get("/jobs/:id", s.getJob)
	api.Get("/jobs/:id/explain", s.explainJob)
	api.Get("/jobs/:id/logs", s.jobLogs)
	api.Post("/jobs/:id/replay", s.replayJob)
	api.Post("/jobs/:id/signals/:name", s.sendSignal)
	api.Post("/events", s.sendEvent)
	api.Post("/jobs/:id/cancel", s.jobActionAPI(jobCancel))
	api.Post("/jobs/:id/retry", s.jobActionAPI(jobRetry))
	api.Post("/jobs/:id/restore", s.jobActionAPI(jobRestore))
	api.Delete("/jobs/:id", s.deleteJob)
	api.Get("/dlq", s.listDLQ)
	api.Post("/dlq/retry", s.retryDLQ)
	api.Get("/bin", s.listBin)
	api.Get("/stats", s.getStats)
}

// routesAPIWorkers registers the worker registry and, with Config.Work,
// the pull API of remote workers (api_workers.go).
func (s *server) routesAPIWorkers(api guarded) {
	api.Get("/workers", s.listWorkers)
	api.Get("/types/:type", s.getType)
	if s.work == nil {
		return
	}
	api.Post("/workers", s.registerWorker)
	api.Post("/workers/:id/claim", s.claimWork)
	api.Post("/workers/:id/heartbeat", s.workerHeartbeat)
	api.Post("/workers/:id/finish", s.finishWork)
	api.Delete("/workers/:id", s.deregisterWorker)
	api.Post("/workers/:id/quiet", s.workerStateAPI(domain.WorkerQuiet))
	api.Post("/workers/:id/terminate", s.workerStateAPI(domain.WorkerTerminate))
	api.Post("/jobs/:id/logs", s.appendJobLog)
	api.Post("/jobs/:id/heartbeat", s.jobHeartbeat)
	api.Post("/jobs/:id/finish", s.jobFinish)
	api.Post("/jobs/:id/steps", s.recordStep)
}

// routesAPIOperations registers what operators run Flint with: the
// benchmark, the logs, the audit trail, the event stream, recurring
// series, queues and the runtime settings.
func (s *server) routesAPIOperations(api guarded) {
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
	api.Post("/queues/:name/push/rotate", s.rotatePushSecret)
	api.Post("/queues/:name/push/revoke", s.revokePushSecret)
	api.Get("/settings", s.getSettings)
	api.Patch("/settings", s.patchSettings)
	api.Get("/settings/changes", s.listSettingsChanges)
}

// routesAPIAlerts registers alert history, deliveries and rules.
func (s *server) routesAPIAlerts(api guarded) {
	api.Get("/alerts", s.listAlerts)
	api.Get("/alerts/deliveries", s.listAlertDeliveries)
	api.Get("/alerts/rules", s.listAlertRules)
	api.Post("/alerts/rules", s.createAlertRule)
	api.Get("/alerts/rules/:id", s.getAlertRule)
	api.Patch("/alerts/rules/:id", s.patchAlertRule)
	api.Delete("/alerts/rules/:id", s.deleteAlertRule)
	api.Post("/alerts/rules/:id/test", s.testAlertRule)
}
