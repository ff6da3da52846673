// Command flint is the Flint job system: one binary that runs the API and
// dashboard, the worker pool and the scheduler loops, together (serve) or
// one role per process (api, worker, scheduler).
//
// Start reading here, then jobs/doc.go for the state machine and
// ARCHITECTURE.md for the map.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
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

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `Flint: background jobs on PostgreSQL.

Usage: flint <command> [flags]

Commands:
  serve       API, dashboard, workers and scheduler in one process (default)
  api         the HTTP API and dashboard only
  worker      a worker pool only
  scheduler   the scheduling and maintenance loops only (promoter, reaper,
              recurring series, aging, retention, DLQ alerts)
  migrate     apply database migrations and exit
  bench       run the scheduler benchmark (heap vs timing wheel)
  healthcheck probe this machine's flint on FLINT_ADDR (for container health checks)
  version     print the version

Configuration comes from the environment (see README.md); run
"flint <command> -h" for the flags of a command.
`

func main() {
	cmd := "serve"
	args := os.Args[1:]
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		args[0] = "help"
	}
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve", "api", "worker", "scheduler", "migrate":
	case "version":
		fmt.Println("flint", version)
		return
	case "healthcheck":
		os.Exit(healthcheck(os.Getenv("FLINT_ADDR")))
	case "bench":
		os.Exit(benchCommand(args))
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "flint: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	cfg, err := loadConfig(cmd, args, nil)
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the command's flags
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint:", err)
		os.Exit(2)
	}
	lg, err := logs.New(logs.Config{Level: cfg.LogLevel, Format: cfg.LogFormat, File: cfg.LogFile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint: logging:", err)
		os.Exit(2)
	}
	defer lg.Close()
	logger := lg.Slog()
	closeLog := func() { _ = lg.Close() }

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cmd, cfg, lg); err != nil {
		logger.Error("flint stopped with an error", "error", err)
		closeLog()
		os.Exit(1)
	}
}

// run starts the components of role and blocks until ctx is done (a signal)
// or one of them fails, then shuts everything down in order.
func run(ctx context.Context, role string, cfg *Config, lg *logs.Logger) error {
	logger := lg.Slog().With("role", role)
	if role == "serve" || role == "api" || role == "migrate" {
		if err := db.Migrate(ctx, cfg.DatabaseURL, logger); err != nil {
			return err
		}
		if role == "migrate" {
			logger.Info("database is up to date")
			return nil
		}
	}
	store, err := db.Open(ctx, db.Config{URL: cfg.DatabaseURL, MaxInterruptions: cfg.MaxInterruptions})
	if err != nil {
		return err
	}
	defer store.Close()

	var rds *db.Redis
	if cfg.RedisURL != "" {
		if rds, err = db.OpenRedis(ctx, cfg.RedisURL, cfg.RedisPrefix, logger); err != nil {
			return err
		}
		defer rds.Close()
		store.SetRedis(rds)
	}

	registry := jobs.NewRegistry()
	mailer, err := workers.NewSMTPMailer(workers.SMTPConfig{URL: cfg.SMTPURL, From: cfg.SMTPFrom})
	if err != nil {
		return err
	}
	jobs.RegisterBuiltins(registry, jobs.BuiltinDeps{Mailer: mailer, HTTP: jobs.HTTPConfig{Allow: cfg.HTTPAllow}})

	settings := &jobs.SettingsHolder{}
	if st, err := store.GetSettings(ctx); err != nil {
		logger.Warn("reading settings failed; using defaults until the next reload", "error", err)
	} else {
		settings.Set(st)
	}
	reloadSettings := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if st, err := store.GetSettings(rctx); err == nil {
			settings.Set(st)
		} else {
			logger.Warn("reloading settings failed", "error", err)
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	runsWorkers := role == "serve" || role == "worker"
	runsScheduler := role == "serve" || role == "scheduler"
	runsHTTP := role == "serve" || role == "api"

	// Events: published by every process after its changes commit, through
	// Redis or NOTIFY; delivered here to the SSE broker of API processes.
	var broker *handlers.Broker
	var deliver func([]jobs.Event)
	if runsHTTP {
		broker = handlers.NewBroker(10000)
		deliver = broker.Deliver
	}
	readyQueue := rds != nil && cfg.ReadyQueue == "redis"
	bus := db.NewEventBus(store, rds, readyQueue, logger, deliver)
	redisState := func() string {
		switch {
		case rds == nil:
			return "disabled"
		case rds.Healthy():
			return "ok"
		default:
			return "down"
		}
	}
	mx := metrics.New(version)
	store.SetEventSink(mx.Tee(bus))
	mx.SetEventCounters(bus.Published, bus.Dropped)
	mx.SetRedisState(redisState)
	if runsHTTP {
		mx.SetStateSource(store.StateQueueCounts)
	}
	bctx, stopBus := context.WithCancel(context.WithoutCancel(ctx))
	busDone := make(chan struct{})
	go func() {
		defer close(busDone)
		_ = bus.Run(bctx)
	}()
	defer func() { stopBus(); <-busDone }()
	if rds != nil {
		g.Go(func() error { return rds.Run(gctx) })
		if runsHTTP {
			g.Go(func() error { return bus.RunRedisSubscriber(gctx) })
		}
		if readyQueue {
			rds.OnRecover(func() {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if n, err := store.RebuildReadyQueue(rctx, rds); err != nil {
					logger.Warn("rebuilding the ready queue failed", "error", err)
				} else {
					logger.Info("ready queue rebuilt from PostgreSQL", "jobs", n)
				}
			})
		}
	}

	// Every process listens: for settings changes, and workers for work.
	listener := db.NewListener(cfg.DatabaseURL, logger, 0)
	if runsHTTP {
		listener.Handle(db.ChannelEvents, bus.ReceivePostgres)
	}
	listener.Handle(db.ChannelSettings, func(string) { reloadSettings() })
	listener.OnConnect(reloadSettings)
	g.Go(func() error {
		// Settings are also re-read every 30 s, in case a notification was
		// lost while the listener reconnected.
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
				reloadSettings()
			}
		}
	})

	var alerter *scheduler.Alerter
	if runsScheduler {
		alerter = scheduler.NewAlerter(scheduler.AlerterConfig{PublicURL: cfg.PublicURL}, store, mailer, settings, logger)
	}
	kickOnDLQ := func(moved []jobs.Moved) {
		if alerter == nil {
			return
		}
		for _, m := range moved {
			if m.Status == jobs.StateDeadLetter {
				alerter.Kick()
				return
			}
		}
	}

	var pool *workers.Pool
	if runsWorkers {
		var fast workers.FastPath
		if readyQueue {
			fast = db.NewReadyQueue(store, rds)
		}
		pool = workers.NewPool(workers.Config{
			WorkerID:          cfg.WorkerID,
			Workers:           cfg.Workers,
			Queues:            cfg.Queues,
			LeaseTTL:          cfg.LeaseTTL,
			HeartbeatInterval: cfg.HeartbeatInterval,
			PollInterval:      cfg.PollInterval,
			DrainTimeout:      cfg.DrainTimeout,
			FastPath:          fast,
			OnRun:             func(j *jobs.Job, o jobs.Outcome, d time.Duration) { mx.ObserveRun(j.Type, o, d) },
			OnMoved:           kickOnDLQ,
		}, store, registry, logger)
		mx.SetPoolState(pool.Running, func() int { return pool.Config().Workers })
		reg := workers.NewRegistry(jobs.WorkerInfo{
			ID: cfg.WorkerID, Queues: cfg.Queues, Concurrency: cfg.Workers, Version: version,
		}, 0, store, logger)
		g.Go(func() error { return reg.Run(gctx) })
		listener.Handle(db.ChannelJobs, pool.Wake)
		listener.Handle(db.ChannelCancel, pool.CancelRequested)
		listener.OnConnect(func() { pool.Wake("") })
		g.Go(func() error { return pool.Run(gctx) })
	}
	if runsScheduler {
		recurrer := scheduler.NewRecurrer(scheduler.RecurrerConfig{}, store, logger)
		promoter := scheduler.NewPromoter(scheduler.PromoterConfig{
			Settings:      settings,
			SweepInterval: cfg.PromoteInterval,
			OnMoved:       func(m []jobs.Moved) { recurrer.Kick(); mx.ObservePromoted(len(m)) },
		}, store, logger)
		listener.Handle(db.ChannelScheduled, promoter.Notify)
		listener.OnConnect(promoter.Resync)
		reaper := scheduler.NewReaper(scheduler.ReaperConfig{Interval: cfg.ReapInterval, OnMoved: func(m []jobs.Moved) {
			mx.ObserveReaped(m)
			kickOnDLQ(m)
		}}, store, logger)
		ager := scheduler.NewAger(scheduler.AgerConfig{Holder: cfg.WorkerID}, store, settings, logger)
		pruner := scheduler.NewPruner(scheduler.RetentionConfig{}, store, settings, logger)
		for _, loop := range []func(context.Context) error{promoter.Run, reaper.Run, recurrer.Run, ager.Run, pruner.Run, alerter.Run} {
			g.Go(func() error { return loop(gctx) })
		}
	}
	// Start listening once every channel has its handler.
	lctx, stopListener := context.WithCancel(context.WithoutCancel(ctx))
	defer stopListener()
	listenerDone := make(chan struct{})
	go func() {
		defer close(listenerDone)
		_ = listener.Run(lctx)
	}()
	defer func() { stopListener(); <-listenerDone }()

	if runsHTTP {
		var wake func(string)
		if pool != nil {
			wake = pool.Wake
		}
		created, err := store.EnsureUser(ctx, cfg.AdminEmail, cfg.AdminPassword, "admin")
		if err != nil {
			return fmt.Errorf("create the first dashboard user: %w", err)
		}
		if created {
			logger.Info("created the first dashboard user", "email", cfg.AdminEmail)
		}
		app := handlers.New(handlers.Config{
			APIKey: cfg.APIKey, BaseContext: gctx, Wake: wake, Settings: settings, Broker: broker,
			Dashboard: store, MailURL: cfg.MailUIURL,
			Session:    handlers.SessionConfig{Key: []byte(cfg.SessionKey), Secure: cfg.Production()},
			Benchmark:  runBenchmark,
			Workers:    func(ctx context.Context) ([]jobs.WorkerInfo, error) { return store.ListWorkers(ctx, 15*time.Second) },
			RedisState: redisState,
			Metrics:    mx.Protected(cfg.MetricsToken),
			Logs:       lg,
			Audit:      store,
		}, store, registry, logger)
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
		g.Go(func() error {
			if err := app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("http server: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return app.ShutdownWithTimeout(10 * time.Second)
		})
		announce(cfg, ln.Addr().String(), created, logger)
	}
	if cfg.MetricsAddr != "" {
		msrv := &http.Server{Addr: cfg.MetricsAddr, Handler: metricsMux(mx.Protected(cfg.MetricsToken)), ReadHeaderTimeout: 10 * time.Second}
		g.Go(func() error {
			if err := msrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics server: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return msrv.Shutdown(context.WithoutCancel(gctx))
		})
	}
	logger.Info("flint started", "version", version, "worker_id", cfg.WorkerID, "workers", cfg.Workers*boolInt(runsWorkers))
	err = g.Wait()
	if err != nil && ctx.Err() == nil {
		return err
	}
	logger.Info("flint stopped")
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// announce prints how to reach the server, with the generated API key when
// there is one, so a developer can start at once.
func announce(cfg *Config, addr string, adminCreated bool, logger *slog.Logger) {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	base := "http://" + net.JoinHostPort(host, port)
	logger.Info("listening", "url", base)
	if cfg.APIKeyGenerated {
		fmt.Fprintf(os.Stderr, "\n  API key (generated for this run; set FLINT_API_KEY to keep one): %s\n", cfg.APIKey)
	}
	if adminCreated && cfg.AdminPasswordGenerated {
		fmt.Fprintf(os.Stderr, "  Dashboard login (generated; set FLINT_ADMIN_PASSWORD to choose one): %s / %s\n", cfg.AdminEmail, cfg.AdminPassword)
	}
	if cfg.SessionKeyGenerated {
		fmt.Fprintf(os.Stderr, "  Sessions end when Flint restarts (FLINT_SESSION_KEY is not set).\n")
	}
	if cfg.APIKeyGenerated || cfg.AdminPasswordGenerated {
		fmt.Fprintf(os.Stderr, `
  Flint is running at %[1]s
  Enqueue a first job:
    curl -s -X POST %[1]s/api/v1/jobs -H 'X-API-Key: %[2]s' \
         -H 'Content-Type: application/json' -d '{"type":"noop"}'

`, base, cfg.APIKey)
	}
}
