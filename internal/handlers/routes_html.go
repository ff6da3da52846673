package handlers

import (
	"context"
	"io/fs"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/static"
)

// BenchmarkFunc runs the scheduler benchmark with n entries for the named
// algorithm ("heap", "timing_wheel" or "both").
type BenchmarkFunc func(ctx context.Context, n int, algorithm string) ([]domain.BenchResult, error)

// dashRoute registers one dashboard route behind the session, CSRF and
// access checks.
type dashRoute func(method, path string, h fiber.Handler)

// routesHTML registers the dashboard: every page, partial and action, in
// the functions below. All of it but the login needs a session; state
// changes need the CSRF token; each route needs the role that accessTable
// (access.go) names. The routes of an area whose store is not configured
// are left out.
func (s *server) routesHTML(app *fiber.App, secure bool) {
	app.Use("/static", staticFiles())

	sec := securityHeaders(secure)
	app.Add(fiber.MethodGet, "/login", sec, s.loginPage)
	app.Add(fiber.MethodPost, "/login", sec, s.login)
	priv := func(method, path string, h fiber.Handler) {
		app.Add(method, path, sec, s.diskNotice, s.sessions.requireLogin, s.csrfProtect, s.authorize, h)
	}
	priv(fiber.MethodPost, "/logout", s.logout)
	s.routesHTMLJobs(priv)
	s.routesHTMLOperations(priv)
	if s.alerts != nil {
		s.routesHTMLAlerts(priv)
	}
	if s.access != nil {
		s.routesHTMLAccess(priv)
	}
	if s.logs != nil {
		priv(fiber.MethodGet, "/logs", s.logsPage)
		priv(fiber.MethodGet, "/logs/tail", s.logsTail)
	}
}

// routesHTMLJobs registers the overview, the job lists and pages, and the
// recurring series. A static path (/jobs/rows, /jobs/new) is registered
// before the /jobs/:id it would otherwise match.
func (s *server) routesHTMLJobs(priv dashRoute) {
	priv(fiber.MethodGet, "/", s.overviewPage)
	priv(fiber.MethodGet, "/overview/live", s.overviewLive)
	priv(fiber.MethodGet, "/jobs", s.listPage("jobs", "Jobs"))
	priv(fiber.MethodPost, "/jobs/bulk", s.bulk("jobs"))
	priv(fiber.MethodGet, "/jobs/rows", s.jobRows)
	priv(fiber.MethodGet, "/jobs/new", s.createPage)
	priv(fiber.MethodGet, "/jobs/new/fields", s.schemaFieldsPartial)
	priv(fiber.MethodPost, "/jobs/new", s.createJob)
	priv(fiber.MethodGet, "/jobs/:id", s.jobPage)
	priv(fiber.MethodGet, "/jobs/:id/live", s.jobLive)
	priv(fiber.MethodGet, "/jobs/:id/log", s.jobLogCard)
	priv(fiber.MethodGet, "/jobs/:id/payload.json", s.jobRawJSON(rawPayload))
	priv(fiber.MethodGet, "/jobs/:id/result.json", s.jobRawJSON(rawResult))
	priv(fiber.MethodGet, "/jobs/:id/edit", s.replayPage)
	priv(fiber.MethodPost, "/jobs/:id/edit", s.replaySubmit)
	priv(fiber.MethodPost, "/jobs/:id/signal", s.signalHTML)
	for _, a := range jobActions {
		priv(fiber.MethodPost, "/jobs/:id/"+string(a), s.jobActionHTML(a))
	}
	priv(fiber.MethodGet, "/dlq", s.listPage("dlq", "Dead-letter queue"))
	priv(fiber.MethodPost, "/dlq/bulk", s.bulk("dlq"))
	priv(fiber.MethodPost, "/dlq/replay-all", s.replayAll)
	priv(fiber.MethodPost, "/dlq/delete-all", s.deleteAllDLQ)
	priv(fiber.MethodGet, "/bin", s.listPage("bin", "Bin"))
	priv(fiber.MethodPost, "/bin/bulk", s.bulk("bin"))
	priv(fiber.MethodGet, "/batches", s.batchesPage)
	priv(fiber.MethodGet, "/batches/:id", s.batchPage)
	priv(fiber.MethodGet, "/batches/:id/live", s.batchLive)
	priv(fiber.MethodGet, "/recurring", s.recurringPage)
	for _, a := range seriesActions {
		priv(fiber.MethodPost, "/recurring/:id/"+string(a), s.recurringActionHTML(a))
	}
}

// routesHTMLOperations registers the workers, queues, settings and
// benchmark pages, the live event stream and the audit trail.
func (s *server) routesHTMLOperations(priv dashRoute) {
	priv(fiber.MethodGet, "/workers", s.workersPage)
	priv(fiber.MethodGet, "/types/:type", s.typePage)
	if s.work != nil {
		priv(fiber.MethodPost, "/workers/:id/quiet", s.workerStateHTML(domain.WorkerQuiet))
		priv(fiber.MethodPost, "/workers/:id/terminate", s.workerStateHTML(domain.WorkerTerminate))
	}
	priv(fiber.MethodGet, "/queues", s.queuesPage)
	priv(fiber.MethodGet, "/queues/:name", s.queuePage)
	priv(fiber.MethodPost, "/queues/:name/pause", s.queuePauseHTML(true))
	priv(fiber.MethodPost, "/queues/:name/resume", s.queuePauseHTML(false))
	priv(fiber.MethodPost, "/queues/:name/limits", s.queueLimitsHTML)
	priv(fiber.MethodGet, "/settings", s.settingsPage)
	priv(fiber.MethodPost, "/settings", s.saveSettings)
	priv(fiber.MethodGet, "/benchmark", s.benchmarkPage)
	priv(fiber.MethodPost, "/benchmark", s.runBenchmarkHTML)
	priv(fiber.MethodGet, "/events", s.dashboardEvents)
	if s.auditStore != nil {
		priv(fiber.MethodGet, "/audit", s.auditPage)
	}
}

// routesHTMLAlerts registers the alerts page and the rule editor.
func (s *server) routesHTMLAlerts(priv dashRoute) {
	priv(fiber.MethodGet, "/alerts", s.alertsPage)
	priv(fiber.MethodGet, "/alerts/rules/new", s.newRulePage)
	priv(fiber.MethodPost, "/alerts/rules", s.createRuleHTML)
	priv(fiber.MethodGet, "/alerts/rules/:id", s.editRulePage)
	priv(fiber.MethodPost, "/alerts/rules/:id", s.saveRuleHTML)
	priv(fiber.MethodPost, "/alerts/rules/:id/delete", s.deleteRuleHTML)
	priv(fiber.MethodPost, "/alerts/rules/:id/test", s.testRuleHTML)
}

// routesHTMLAccess registers one's account, and the people and API keys
// pages.
func (s *server) routesHTMLAccess(priv dashRoute) {
	priv(fiber.MethodGet, "/account", s.accountPage)
	priv(fiber.MethodPost, "/account/password", s.changePassword)
	priv(fiber.MethodGet, "/users", s.usersPage)
	priv(fiber.MethodPost, "/users", s.addUser)
	for _, a := range userActions {
		priv(fiber.MethodPost, "/users/:id/"+string(a), s.userAction(a))
	}
	priv(fiber.MethodGet, "/keys", s.keysPage)
	priv(fiber.MethodPost, "/keys", s.createKeyHTML)
	priv(fiber.MethodPost, "/keys/:id/revoke", s.revokeKeyHTML)
	priv(fiber.MethodPost, "/keys/:id/rotate", s.rotateKeyHTML)
}

// favicon answers the /favicon.ico that browsers ask for on their own with
// the brand mark (an SVG; the pages link it as /static/favicon.svg).
func favicon(c *fiber.Ctx) error {
	b, err := fs.ReadFile(static.FS, "favicon.svg")
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "image/svg+xml")
	c.Set(fiber.HeaderCacheControl, "public, max-age=86400")
	c.Set("X-Content-Type-Options", "nosniff")
	return c.Send(b)
}

// staticFiles serves the embedded assets.
func staticFiles() fiber.Handler {
	files := filesystem.New(filesystem.Config{Root: http.FS(static.FS)})
	return func(c *fiber.Ctx) error {
		c.Set("Cache-Control", "public, max-age=3600")
		c.Set("X-Content-Type-Options", "nosniff")
		return files(c)
	}
}
