package handlers

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Config configures the HTTP server New builds. Only APIKey is required:
// every other field's zero value says what it means, and a nil Dashboard,
// Logs, Audit, Alerts, Work or Access leaves that area's routes out.
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
	Settings *domain.SettingsHolder
	// Broker streams job events to SSE clients; nil means a broker that
	// receives nothing (no events configured).
	Broker *Broker
	// Workers lists the worker registry; nil means an empty list.
	Workers func(ctx context.Context) ([]domain.WorkerInfo, error)
	// RedisState reports the Redis fast path for /healthz: "ok", "down"
	// or "disabled"; nil means disabled.
	RedisState func() string
	// Dashboard, when set, serves the HTML dashboard with its own store
	// needs; nil serves the JSON API only.
	Dashboard DashboardStore
	// Session configures dashboard sessions.
	Session SessionConfig
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names
	// the client (see clientIP); nil trusts none, and the connection's
	// peer is the client.
	TrustedProxies []netip.Prefix
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
	// HTTPAllow opens, for push URLs, what the SSRF guard refuses
	// (FLINT_HTTP_ALLOW entries).
	HTTPAllow []string
	// Work serves the pull API for remote workers; nil leaves it out.
	Work *WorkConfig
	// Types is the catalog of job types enqueues may name; nil means the
	// types registry has handlers for.
	Types *domain.Catalog
	// Access stores people and API keys; nil means the bootstrap key
	// (APIKey) is the only key, and no Users or Keys pages.
	Access AccessStore
}

// withDefaults returns cfg with the zero values its fields document
// filled in.
func (cfg Config) withDefaults() Config {
	cfg.Clock = cmp.Or[jobs.Clock](cfg.Clock, jobs.SystemClock{})
	if cfg.BaseContext == nil {
		cfg.BaseContext = context.Background()
	}
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, 30*time.Second)
	cfg.BodyLimit = cmp.Or(cfg.BodyLimit, 16<<20)
	if cfg.Settings == nil {
		cfg.Settings = &domain.SettingsHolder{}
	}
	if cfg.Broker == nil {
		cfg.Broker = NewBroker(16)
	}
	if cfg.Workers == nil {
		cfg.Workers = func(context.Context) ([]domain.WorkerInfo, error) { return []domain.WorkerInfo{}, nil }
	}
	if cfg.RedisState == nil {
		cfg.RedisState = func() string { return "disabled" }
	}
	if cfg.AlertTest == nil {
		cfg.AlertTest = func(context.Context, domain.AlertRule) []domain.AlertDelivery {
			return []domain.AlertDelivery{{Channel: "all", Error: "this Flint process has no mailer or webhook client configured"}}
		}
	}
	return cfg
}

// fiberConfig is the Fiber app's configuration: errors through
// ErrorHandler, and the limits and timeouts of every connection.
func fiberConfig(cfg Config, logger *slog.Logger) fiber.Config {
	return fiber.Config{
		AppName:               "Flint",
		ErrorHandler:          ErrorHandler(logger),
		BodyLimit:             cfg.BodyLimit,
		Immutable:             true, // values read from a request stay valid after it
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		ReadBufferSize:        16 << 10, // request line and headers: a page asks for up to 100 rows by id
		// No write timeout: SSE responses stream for as long as the client
		// stays; each stream notices a gone client on its next flush.
		IdleTimeout: 120 * time.Second,
	}
}
