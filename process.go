package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"flint/db"
	"flint/handlers"
	"flint/jobs"
	"flint/logs"
	"flint/metrics"
	"flint/scheduler"
	"flint/workers"
)

// roles says which parts of Flint a command runs in this process.
type roles struct {
	name      string
	migrates  bool // applies migrations at start
	http      bool // API, dashboard, SSE
	workers   bool // a worker pool
	scheduler bool // promoter, reaper, recurring series, aging, retention, alerts
	onlyOnce  bool // migrate and exit
}

func rolesOf(cmd string) roles {
	r := roles{name: cmd}
	switch cmd {
	case "serve":
		r.migrates, r.http, r.workers, r.scheduler = true, true, true, true
	case "api":
		r.migrates, r.http = true, true
	case "worker":
		r.workers = true
	case "scheduler":
		r.scheduler = true
	case "migrate":
		r.migrates, r.onlyOnce = true, true
	}
	return r
}

// process is one running Flint: what its components share while they run.
type process struct {
	roles    roles
	cfg      *Config
	lg       *logs.Logger
	logger   *slog.Logger
	ctx      context.Context // the signal context: done when Flint is told to stop
	g        *errgroup.Group // components; the first failure stops the rest
	gctx     context.Context
	store    *db.Store
	rds      *db.Redis // nil in PostgreSQL-only mode
	registry *jobs.Registry
	mailer   jobs.Mailer
	notifier *scheduler.Notifier // renders and sends alert notifications
	settings *jobs.SettingsHolder
	mx       *metrics.Metrics
	bus      *db.EventBus
	broker   *handlers.Broker // nil without HTTP
	listener *db.Listener
	alerter  *scheduler.Alerter // nil without the scheduler
	pool     *workers.Pool      // nil without workers
	clock    jobs.Clock         // the one clock handlers, workers and scheduler are given
	cleanup  []func()           // run in reverse order at the end
}

// run starts the components of the process's roles and blocks until ctx
// is done (a signal) or one of them fails, then shuts everything down in
// order. An error is logged here, before the log's last entries are
// shipped to the database, so that the Logs page shows why a process
// stopped.
func run(ctx context.Context, r roles, cfg *Config, lg *logs.Logger) (err error) {
	p := &process{roles: r, cfg: cfg, lg: lg, logger: lg.Slog().With("role", r.name), ctx: ctx, clock: jobs.SystemClock{}}
	defer func() {
		for i := len(p.cleanup) - 1; i >= 0; i-- {
			p.cleanup[i]()
		}
	}()
	defer func() {
		if err != nil {
			p.logger.Error("flint stopped with an error", "error", err)
		}
	}()
	if r.migrates {
		if err := db.Migrate(ctx, cfg.directURL(), p.logger); err != nil {
			return err
		}
		if r.onlyOnce {
			p.logger.Info("database is up to date")
			return nil
		}
	}
	if err := p.open(); err != nil {
		return err
	}
	p.g, p.gctx = errgroup.WithContext(ctx)
	p.startEvents()
	p.startSettings()
	if r.scheduler {
		p.alerter = scheduler.NewAlerter(scheduler.AlerterConfig{PublicURL: cfg.PublicURL}, p.store, p.notifier, p.settings, p.logger)
	}
	if r.workers {
		p.startWorkers()
	}
	if r.scheduler {
		p.startScheduler()
	}
	p.startListener() // once every channel has its handler
	if r.http {
		if err := p.startHTTP(); err != nil {
			return err
		}
	}
	p.startMetricsServer()
	workersHere := 0
	if r.workers {
		workersHere = cfg.Workers
	}
	p.logger.Info("flint started", "version", version, "worker_id", cfg.WorkerID, "workers", workersHere)
	if r.scheduler {
		p.warnWithoutAutovacuum()
	}
	if err := p.g.Wait(); err != nil && ctx.Err() == nil {
		return err
	}
	p.logger.Info("flint stopped")
	return nil
}

// open connects to PostgreSQL (and Redis), registers the job types and
// loads the settings.
func (p *process) open() error {
	var err error
	if p.store, err = db.Open(p.ctx, p.cfg.storeConfig()); err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, p.store.Close)
	p.shipLogs()
	if p.cfg.RedisURL != "" {
		if p.rds, err = db.OpenRedis(p.ctx, p.cfg.RedisURL, p.cfg.RedisPrefix, p.logger); err != nil {
			return err
		}
		p.cleanup = append(p.cleanup, func() { _ = p.rds.Close() })
		p.store.SetRedis(p.rds)
	}
	p.registry = jobs.NewRegistry()
	mailer, err := workers.NewSMTPMailer(workers.SMTPConfig{URL: p.cfg.SMTPURL, From: p.cfg.SMTPFrom})
	if err != nil {
		return err
	}
	p.mailer = mailer
	jobs.RegisterBuiltins(p.registry, jobs.BuiltinDeps{Mailer: mailer, HTTP: jobs.HTTPConfig{Allow: p.cfg.HTTPAllow}})
	p.settings = &jobs.SettingsHolder{}
	sender, err := workers.NewAlertSender(mailer, p.cfg.HTTPAllow, 0)
	if err != nil {
		return err
	}
	p.notifier = scheduler.NewNotifier(scheduler.NotifierConfig{PublicURL: p.cfg.PublicURL}, sender, p.settings)
	if st, err := p.store.GetSettings(p.ctx); err != nil {
		p.logger.Warn("reading settings failed; using defaults until the next reload", "error", err)
	} else {
		p.settings.Set(st)
	}
	return nil
}

// shipLogs stores this process's log entries in the database, for the
// Logs page of any API process, until the process ends: the entries from
// its start, and its last ones after the components stopped (cleanup runs
// it before the store closes).
func (p *process) shipLogs() {
	host, _ := os.Hostname()
	sctx, stop := context.WithCancel(context.WithoutCancel(p.ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.lg.Ship(sctx, p.store, logs.ShipConfig{Process: logs.Process{ID: p.cfg.WorkerID, Host: host, Role: p.roles.name}})
	}()
	p.cleanup = append(p.cleanup, func() { stop(); <-done })
}

func (p *process) readyQueue() bool { return p.rds != nil && p.cfg.ReadyQueue == "redis" }

func (p *process) redisState() string {
	switch {
	case p.rds == nil:
		return "disabled"
	case p.rds.Healthy():
		return "ok"
	default:
		return "down"
	}
}

// startEvents runs the event bus: every process publishes its committed
// changes through Redis or NOTIFY; API processes deliver them to their SSE
// broker. Metrics see every event on the way.
func (p *process) startEvents() {
	var deliver func([]jobs.Event)
	if p.roles.http {
		p.broker = handlers.NewBroker(10000)
		deliver = p.broker.Deliver
	}
	p.bus = db.NewEventBus(p.store, p.rds, p.readyQueue(), p.logger, deliver)
	p.mx = metrics.New(version)
	p.store.SetEventSink(p.mx.Tee(p.bus))
	p.mx.SetEventCounters(p.bus.Published, p.bus.Dropped)
	p.mx.SetRedisState(p.redisState)
	if p.roles.http {
		p.mx.SetStateSource(p.store.StateQueueCounts)
	}
	// The bus outlives the components, so their last events still go out.
	bctx, stopBus := context.WithCancel(context.WithoutCancel(p.ctx))
	busDone := make(chan struct{})
	go func() {
		defer close(busDone)
		_ = p.bus.Run(bctx)
	}()
	p.cleanup = append(p.cleanup, func() { stopBus(); <-busDone })
	if p.rds == nil {
		return
	}
	p.g.Go(func() error { return p.rds.Run(p.gctx) })
	if p.roles.http {
		p.g.Go(func() error { return p.bus.RunRedisSubscriber(p.gctx) })
	}
	if p.readyQueue() {
		p.rds.OnRecover(func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), time.Minute)
			defer cancel()
			if n, err := p.store.RebuildReadyQueue(rctx, p.rds); err != nil {
				p.logger.Warn("rebuilding the ready queue failed", "error", err)
			} else {
				p.logger.Info("ready queue rebuilt from PostgreSQL", "jobs", n)
			}
		})
	}
}

// startSettings creates the listener every process has, and keeps the
// settings current: on a notification, on every (re)connect, and every
// 30 s in case a notification was lost while the listener reconnected.
func (p *process) startSettings() {
	reload := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
		defer cancel()
		if st, err := p.store.GetSettings(rctx); err == nil {
			p.settings.Set(st)
		} else {
			p.logger.Warn("reloading settings failed", "error", err)
		}
	}
	p.listener = db.NewListener(p.cfg.directURL(), p.logger, 0) // "": polls instead (behind PgBouncer)
	if p.roles.http {
		p.listener.Handle(db.ChannelEvents, p.bus.ReceivePostgres)
	}
	p.listener.Handle(db.ChannelSettings, func(string) { reload() })
	p.listener.OnConnect(reload)
	p.g.Go(func() error {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.gctx.Done():
				return nil
			case <-t.C:
				reload()
			}
		}
	})
}

// kickOnDLQ wakes the alerter (in this process) when jobs reached the DLQ.
func (p *process) kickOnDLQ(moved []jobs.Moved) {
	if p.alerter == nil {
		return
	}
	for _, m := range moved {
		if m.Status == jobs.StateDeadLetter {
			p.alerter.Kick()
			return
		}
	}
}

// startWorkers runs the worker pool and its entry in the worker registry.
func (p *process) startWorkers() {
	var fast workers.FastPath
	if p.readyQueue() {
		fast = db.NewReadyQueue(p.store, p.rds)
	}
	cfg := p.cfg
	p.pool = workers.NewPool(workers.Config{
		WorkerID:          cfg.WorkerID,
		Workers:           cfg.Workers,
		Queues:            cfg.Queues,
		LeaseTTL:          cfg.LeaseTTL,
		HeartbeatInterval: cfg.HeartbeatInterval,
		PollInterval:      cfg.PollInterval,
		DrainTimeout:      cfg.DrainTimeout,
		FastPath:          fast,
		OnRun:             func(j *jobs.Job, o jobs.Outcome, d time.Duration) { p.mx.ObserveRun(j.Type, o, d) },
		OnMoved:           p.kickOnDLQ,
	}, p.store, p.registry, p.logger)
	p.mx.SetPoolState(p.pool.Running, func() int { return p.pool.Config().Workers })
	reg := workers.NewRegistry(jobs.WorkerInfo{
		ID: cfg.WorkerID, Queues: cfg.Queues, Concurrency: cfg.Workers, Version: version,
	}, p.registry, 0, p.store, p.clock, p.logger)
	p.g.Go(func() error { return reg.Run(p.gctx) })
	p.listener.Handle(db.ChannelJobs, p.pool.Wake)
	p.listener.Handle(db.ChannelCancel, p.pool.CancelRequested)
	// A queue was paused, resumed or had its limits changed: claims made
	// with the old settings take nothing until they are reloaded.
	reloadQueues := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
		defer cancel()
		if err := p.store.ReloadQueueSettings(rctx); err != nil {
			p.logger.Warn("reloading queue settings failed", "error", err)
		}
		p.pool.Wake("")
	}
	p.listener.Handle(db.ChannelQueues, func(string) { reloadQueues() })
	p.listener.OnConnect(reloadQueues)
	p.listener.OnConnect(func() { p.pool.Wake("") })
	p.g.Go(func() error { return p.pool.Run(p.gctx) })
}

// startScheduler runs the loops that move jobs by time and keep things tidy.
func (p *process) startScheduler() {
	recurrer := scheduler.NewRecurrer(scheduler.RecurrerConfig{}, p.store, p.logger)
	promoter := scheduler.NewPromoter(scheduler.PromoterConfig{
		Settings:      p.settings,
		SweepInterval: p.cfg.PromoteInterval,
		OnMoved:       func(m []jobs.Moved) { recurrer.Kick(); p.mx.ObservePromoted(len(m)) },
		Clock:         p.clock,
	}, p.store, p.logger)
	p.listener.Handle(db.ChannelScheduled, promoter.Notify)
	p.listener.OnConnect(promoter.Resync)
	reaper := scheduler.NewReaper(scheduler.ReaperConfig{Interval: p.cfg.ReapInterval, OnMoved: func(m []jobs.Moved) {
		p.mx.ObserveReaped(m)
		p.kickOnDLQ(m)
	}}, p.store, p.logger)
	ager := scheduler.NewAger(scheduler.AgerConfig{Holder: p.cfg.WorkerID}, p.store, p.settings, p.logger)
	pruner := scheduler.NewPruner(scheduler.RetentionConfig{}, p.store, p.settings, p.logger)
	archiver := scheduler.NewArchiver(scheduler.ArchiveConfig{}, p.store, p.settings, p.logger)
	for _, loop := range []func(context.Context) error{promoter.Run, reaper.Run, recurrer.Run, ager.Run, pruner.Run, archiver.Run, p.alerter.Run} {
		p.g.Go(func() error { return loop(p.gctx) })
	}
}

// startListener starts LISTEN; it outlives the components, like the bus.
func (p *process) startListener() {
	lctx, stop := context.WithCancel(context.WithoutCancel(p.ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.listener.Run(lctx)
	}()
	p.cleanup = append(p.cleanup, func() { stop(); <-done })
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
		Session:    handlers.SessionConfig{Key: []byte(cfg.SessionKey), Secure: cfg.Production()},
		Benchmark:  runBenchmark,
		Workers:    func(ctx context.Context) ([]jobs.WorkerInfo, error) { return p.store.ListWorkers(ctx, 15*time.Second) },
		RedisState: p.redisState,
		Metrics:    p.mx.Protected(cfg.MetricsToken),
		Logs:       p.store,
		Audit:      p.store,
		Alerts:     p.store,
		AlertTest:  p.notifier.SendTest,
		Access:     p.store,
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

// warnWithoutAutovacuum logs a warning when autovacuum will not vacuum the
// jobs table: dead row versions would pile up unseen until claims slow
// down. One scheduler says it at start.
func (p *process) warnWithoutAutovacuum() {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	on, err := p.store.AutovacuumOn(ctx)
	switch {
	case err != nil:
		p.logger.Warn("could not tell whether autovacuum runs", "error", err)
	case !on:
		p.logger.Warn("autovacuum is off for the jobs table: dead row versions of every claim and finish will pile up and claims slow down; turn it on (ALTER SYSTEM SET autovacuum = on, or reset the table's autovacuum_enabled) or VACUUM jobs regularly")
	}
}
