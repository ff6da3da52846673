package handlers

import (
	"context"
	"io/fs"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"flint/jobs"
	"flint/static"
)

// BenchmarkFunc runs the scheduler benchmark with n entries for the named
// algorithm ("heap", "timing_wheel" or "both").
type BenchmarkFunc func(ctx context.Context, n int, algorithm string) ([]jobs.BenchResult, error)

// routesHTML registers the dashboard: every page, partial and action in one
// list. All of it needs a session; state changes need the CSRF token; each
// route needs the role that accessTable (access.go) names.
func (s *server) routesHTML(app *fiber.App, secure bool) {
	app.Use("/static", staticFiles())

	sec := securityHeaders(secure)
	pub := func(method, path string, h fiber.Handler) { app.Add(method, path, sec, h) }
	priv := func(method, path string, h fiber.Handler) {
		app.Add(method, path, sec, s.sessions.requireLogin, csrfProtect, s.authorize, h)
	}
	pub(fiber.MethodGet, "/login", s.loginPage)
	pub(fiber.MethodPost, "/login", s.login)

	priv(fiber.MethodPost, "/logout", s.logout)
	priv(fiber.MethodGet, "/", s.overviewPage)
	priv(fiber.MethodGet, "/overview/live", s.overviewLive)
	priv(fiber.MethodGet, "/jobs", s.listPage("jobs", "Jobs"))
	priv(fiber.MethodPost, "/jobs/bulk", s.bulk("jobs"))
	priv(fiber.MethodGet, "/jobs/rows", s.jobRows)
	priv(fiber.MethodGet, "/jobs/new", s.createPage)
	priv(fiber.MethodPost, "/jobs/new", s.createJob)
	priv(fiber.MethodGet, "/jobs/:id", s.jobPage)
	priv(fiber.MethodGet, "/jobs/:id/live", s.jobLive)
	priv(fiber.MethodGet, "/jobs/:id/log", s.jobLogCard)
	priv(fiber.MethodGet, "/jobs/:id/edit", s.replayPage)
	priv(fiber.MethodPost, "/jobs/:id/edit", s.replaySubmit)
	for _, a := range jobActions {
		priv(fiber.MethodPost, "/jobs/:id/"+string(a), s.jobActionHTML(a))
	}
	priv(fiber.MethodGet, "/dlq", s.listPage("dlq", "Dead-letter queue"))
	priv(fiber.MethodPost, "/dlq/bulk", s.bulk("dlq"))
	priv(fiber.MethodPost, "/dlq/replay-all", s.replayAll)
	priv(fiber.MethodGet, "/bin", s.listPage("bin", "Bin"))
	priv(fiber.MethodPost, "/bin/bulk", s.bulk("bin"))
	priv(fiber.MethodGet, "/recurring", s.recurringPage)
	for _, a := range seriesActions {
		priv(fiber.MethodPost, "/recurring/:id/"+string(a), s.recurringActionHTML(a))
	}
	priv(fiber.MethodGet, "/workers", s.workersPage)
	priv(fiber.MethodGet, "/queues", s.queuesPage)
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
	if s.alerts != nil {
		priv(fiber.MethodGet, "/alerts", s.alertsPage)
		priv(fiber.MethodGet, "/alerts/rules/new", s.newRulePage)
		priv(fiber.MethodPost, "/alerts/rules", s.createRuleHTML)
		priv(fiber.MethodGet, "/alerts/rules/:id", s.editRulePage)
		priv(fiber.MethodPost, "/alerts/rules/:id", s.saveRuleHTML)
		priv(fiber.MethodPost, "/alerts/rules/:id/delete", s.deleteRuleHTML)
		priv(fiber.MethodPost, "/alerts/rules/:id/test", s.testRuleHTML)
	}
	if s.access != nil {
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
	if s.logs != nil {
		priv(fiber.MethodGet, "/logs", s.logsPage)
		priv(fiber.MethodGet, "/logs/tail", s.logsTail)
	}
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
