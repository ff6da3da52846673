package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// startTypes makes the catalog of job types the process accepts
// (registered here, served by a worker seen lately, configured, or any
// type in a push queue) with their payload schemas, kept current by
// PostgreSQL's notifications, and stores the schemas of this process's
// typed handlers with their types.
func (p *process) startTypes() error {
	c := domain.NewCatalog(p.registry, p.cfg.JobTypes, p.store.ServedTypes)
	c.PushQueues(p.store.PushedQueue)
	c.UseSchemas(p.store)
	p.listener.Handle(db.ChannelTypes, func(string) { c.Invalidate() })
	p.listener.OnConnect(c.Invalidate)
	p.types = c
	if p.roles.http && !p.roles.workers {
		// The catalog accepts any type into a push queue: an API process
		// without a pool (which keeps them otherwise) keeps the queues'
		// settings current too.
		reload := func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
			defer cancel()
			if err := p.store.ReloadQueueSettings(rctx); err != nil {
				p.logger.Warn("reloading queue settings failed", "error", err)
			}
		}
		p.listener.Handle(db.ChannelQueues, func(string) { reload() })
		p.listener.OnConnect(reload)
	}
	if !p.roles.http && !p.roles.workers {
		return nil
	}
	return recordHandlerSchemas(p.ctx, p.registry, p.store, domain.SchemaAuthor{Source: domain.SchemaFromProcess,
		WorkerID: p.cfg.WorkerID, Language: "go", WorkerVersion: p.app.version()}, p.logger)
}

// recordHandlerSchemas stores the payload schemas of registry's handlers
// (jobs.Typed's, derived from their structs) with their types.
func recordHandlerSchemas(ctx context.Context, registry *jobs.Registry, store *db.Store, by domain.SchemaAuthor, logger *slog.Logger) error {
	raw, err := registry.Schemas()
	if err != nil {
		return err
	}
	compiled := make(map[string]*jobs.PayloadSchema, len(raw))
	for t, text := range raw {
		sch, err := jobs.CompileSchema(text)
		if err != nil {
			return fmt.Errorf("job type %s: the payload schema derived from its handler %s", t, err)
		}
		compiled[t] = sch
	}
	changed, err := store.RecordSchemas(ctx, compiled, by)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		logger.Info("payload schemas stored", "types", changed)
	}
	return nil
}

// startHTTP creates the first dashboard user if there is none and serves
// the API and dashboard on cfg.Addr.
func (p *process) startHTTP() error {
	cfg := p.cfg
	var wake func(string)
	if p.pool != nil {
		wake = p.pool.Wake
	}
	created, err := p.store.EnsureUser(p.ctx, cfg.AdminEmail, cfg.AdminPassword, "admin")
	if err != nil {
		return fmt.Errorf("create the first dashboard user: %w", err)
	}
	if created {
		p.logger.Info("created the first dashboard user", "email", cfg.AdminEmail)
	}
	app := handlers.New(handlers.Config{
		APIKey: cfg.APIKey, BaseContext: p.gctx, Wake: wake, Settings: p.settings, Broker: p.broker, Clock: p.clock,
		Dashboard: p.store, MailURL: cfg.MailUIURL,
		Session:        handlers.SessionConfig{Key: []byte(cfg.SessionKey), Secure: cfg.Production()},
		TrustedProxies: cfg.TrustedProxies,
		Benchmark:      runBenchmark,
		Workers: func(ctx context.Context) ([]domain.WorkerInfo, error) {
			return p.store.ListWorkers(ctx, 15*time.Second)
		},
		RedisState: p.redisState,
		Metrics:    p.mx.Protected(cfg.MetricsToken),
		Logs:       p.store,
		Audit:      p.store,
		Alerts:     p.store,
		AlertTest:  p.notifier.SendTest,
		Access:     p.store,
		Types:      p.types,
		HTTPAllow:  cfg.HTTPAllow,
		Work: &handlers.WorkConfig{Store: p.store, Hub: p.hub, LeaseTTL: cfg.LeaseTTL, HeartbeatInterval: cfg.HeartbeatInterval,
			PollInterval: cfg.PollInterval, OnMoved: p.kickOnDLQ},
	}, p.store, p.registry, p.logger)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	p.g.Go(func() error {
		if err := app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("http server: %w", err)
		}
		return nil
	})
	p.g.Go(func() error {
		<-p.gctx.Done()
		return app.ShutdownWithTimeout(10 * time.Second)
	})
	announce(cfg, ln.Addr().String(), created, p.logger)
	return nil
}

// startMetricsServer serves /metrics on its own address, for processes
// without HTTP (or to keep it off the public port).
func (p *process) startMetricsServer() {
	if p.cfg.MetricsAddr == "" {
		return
	}
	msrv := &http.Server{Addr: p.cfg.MetricsAddr, Handler: metricsMux(p.mx.Protected(p.cfg.MetricsToken)), ReadHeaderTimeout: 10 * time.Second}
	p.g.Go(func() error {
		if err := msrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics server: %w", err)
		}
		return nil
	})
	p.g.Go(func() error {
		<-p.gctx.Done()
		return msrv.Shutdown(context.WithoutCancel(p.gctx))
	})
}
