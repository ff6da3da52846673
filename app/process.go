package app

import (
	"context"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/metrics"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
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

// rolesOf is the roles of command cmd; an unknown command runs none.
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

// names is the roles as the registry records them (domain.RoleAPI...).
func (r roles) names() []string {
	var out []string
	if r.http {
		out = append(out, domain.RoleAPI)
	}
	if r.scheduler {
		out = append(out, domain.RoleScheduler)
	}
	if r.workers {
		out = append(out, domain.RoleWorkers)
	}
	return out
}

// process is one running Flint: what its components share while they run.
type process struct {
	app      *App
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
	mailer   domain.Mailer
	notifier *scheduler.Notifier // renders and sends alert notifications
	settings *domain.SettingsHolder
	mx       *metrics.Metrics
	bus      *db.EventBus
	broker   *handlers.Broker  // nil without HTTP
	hub      *handlers.WorkHub // remote workers' waiting claims; nil without HTTP
	listener *db.Listener
	types    *domain.Catalog    // the job types and payload schemas enqueues are checked against
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
func (a *App) run(ctx context.Context, r roles, cfg *Config, lg *logs.Logger) (err error) {
	p := &process{app: a, roles: r, cfg: cfg, lg: lg, logger: lg.Slog().With("role", r.name), ctx: ctx, clock: jobs.SystemClock{}}
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
	if err := p.startTracing(); err != nil {
		return err
	}
	if r.migrates {
		err := p.untilReachable("migrate", func() error {
			return db.MigrateWith(ctx, cfg.directURL(), p.logger, db.MigrateOptions{Force: cfg.MigrateForce})
		})
		if err != nil {
			return p.stoppedBeforeStart(err)
		}
		if r.onlyOnce {
			p.logger.Info("database is up to date")
			return nil
		}
	}
	if err := p.untilReachable("connect", p.open); err != nil {
		return p.stoppedBeforeStart(err)
	}
	p.g, p.gctx = errgroup.WithContext(ctx)
	p.startEvents()
	p.startSettings()
	if err := p.startTypes(); err != nil {
		return err
	}
	if r.http {
		// Remote workers' long polls wake on the notifications pools use.
		p.hub = handlers.NewWorkHub(0)
		p.listener.Handle(db.ChannelJobs, p.hub.Wake)
		p.listener.Handle(db.ChannelDue, p.hub.Wake)
	}
	if r.scheduler {
		p.alerter = scheduler.NewAlerter(scheduler.AlerterConfig{PublicURL: cfg.PublicURL}, p.store, p.notifier, p.settings, p.logger)
	}
	if r.workers {
		p.startWorkers()
		if err := p.startPusher(); err != nil {
			return err
		}
	}
	if r.scheduler {
		p.startScheduler()
	}
	p.startPresence(r)
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
	p.logger.Info("flint started", "version", p.app.version(), "worker_id", cfg.WorkerID, "workers", workersHere)
	if r.scheduler {
		p.warnWithoutAutovacuum()
	}
	if err := p.g.Wait(); err != nil && ctx.Err() == nil {
		return err
	}
	p.logger.Info("flint stopped")
	return nil
}

// kickOnDLQ wakes the alerter (in this process) when jobs reached the DLQ.
func (p *process) kickOnDLQ(moved []domain.Moved) {
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

// startPresence keeps this process's entry in the registry: every Flint
// process has one, with the roles it runs and its version (the Workers
// page shows them; flint migrate finds older processes by them). Only a
// process that runs workers has slots, queues and job types.
func (p *process) startPresence(r roles) {
	info := domain.WorkerInfo{ID: p.cfg.WorkerID, Version: p.app.version(), Roles: r.names()}
	var types workers.TypeLister
	if r.workers {
		info.Queues, info.Concurrency, types = p.cfg.Queues, p.cfg.Workers, p.registry
	}
	presence := workers.NewPresence(info, types, 0, p.store, p.clock, p.logger)
	p.g.Go(func() error { return presence.Run(p.gctx) })
}

// startWorkers runs the worker pool.
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
		OnRun:             func(j *jobs.Job, o domain.Outcome, d time.Duration) { p.mx.ObserveRun(j.Type, o, d) },
		OnMoved:           p.kickOnDLQ,
		Types:             domain.Prepared(p.gctx, p.types),
	}, p.store, p.registry, p.logger)
	p.mx.SetPoolState(p.pool.Running, func() int { return p.pool.Config().Workers })
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

// startPusher runs the pusher, which POSTs the jobs of push queues to
// their endpoints.
func (p *process) startPusher() error {
	cfg := p.cfg
	pusher, err := workers.NewPusher(workers.PusherConfig{
		WorkerID: domain.PushWorkerID(cfg.WorkerID), MaxInFlight: cfg.PushConcurrency, LeaseTTL: cfg.LeaseTTL,
		HeartbeatInterval: cfg.HeartbeatInterval, PollInterval: cfg.PollInterval, DrainTimeout: cfg.DrainTimeout,
		Allow: cfg.HTTPAllow, OnMoved: p.kickOnDLQ, Types: domain.Prepared(p.gctx, p.types),
	}, p.store, p.logger)
	if err != nil {
		return err
	}
	p.listener.Handle(db.ChannelJobs, pusher.Wake)
	p.listener.Handle(db.ChannelDue, pusher.Wake)
	p.listener.Handle(db.ChannelQueues, func(string) { pusher.Reload() })
	p.listener.OnConnect(pusher.Reload)
	p.g.Go(func() error { return pusher.Run(p.gctx) })
	return nil
}

// startScheduler runs the loops that move jobs by time and keep things tidy.
func (p *process) startScheduler() {
	recurrer := scheduler.NewRecurrer(scheduler.RecurrerConfig{}, p.store, p.logger)
	promoter := scheduler.NewPromoter(scheduler.PromoterConfig{
		Settings:      p.settings,
		SweepInterval: p.cfg.PromoteInterval,
		OnMoved:       func(m []domain.Moved) { recurrer.Kick(); p.mx.ObservePromoted(len(m)) },
		Clock:         p.clock,
	}, p.store, p.logger)
	p.listener.Handle(db.ChannelScheduled, promoter.Notify)
	p.listener.OnConnect(promoter.Resync)
	reaper := scheduler.NewReaper(scheduler.ReaperConfig{Interval: p.cfg.ReapInterval, OnMoved: func(m []domain.Moved) {
		p.mx.ObserveReaped(m)
		p.kickOnDLQ(m)
	}}, p.store, p.logger)
	ager := scheduler.NewAger(scheduler.AgerConfig{Holder: p.cfg.WorkerID}, p.store, p.settings, p.logger)
	pruner := scheduler.NewPruner(scheduler.RetentionConfig{}, p.store, p.settings, p.logger)
	archiver := scheduler.NewArchiver(scheduler.ArchiveConfig{}, p.store, p.settings, p.logger)
	vacuumer := scheduler.NewVacuumer(scheduler.VacuumConfig{Holder: p.cfg.WorkerID}, p.store, p.clock, p.logger)
	for _, loop := range []func(context.Context) error{reaper.Run, recurrer.Run, ager.Run, pruner.Run, archiver.Run, vacuumer.Run, p.alerter.Run} {
		p.g.Go(func() error { return loop(p.gctx) })
	}
	p.g.Go(func() error {
		err := promoter.Run(p.gctx)
		// Nothing is promoted from here on: the series promoted last get
		// their next occurrences before the process exits.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(p.gctx), 5*time.Second)
		defer cancel()
		recurrer.Settle(sctx)
		return err
	})
}
