package app

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
)

// open connects to PostgreSQL (and Redis), registers the job types and
// loads the settings.
func (p *process) open() error {
	var err error
	storeCfg := p.cfg.storeConfig()
	storeCfg.Logger = p.logger
	if p.store, err = db.Open(p.ctx, storeCfg); err != nil {
		return err
	}
	p.cleanup = append(p.cleanup, p.store.Close)
	p.store.SetLogger(p.logger)
	p.shipLogs()
	if p.cfg.RedisURL != "" {
		if p.rds, err = db.OpenRedis(p.ctx, p.cfg.RedisURL, p.cfg.RedisPrefix, p.logger); err != nil {
			return err
		}
		p.cleanup = append(p.cleanup, func() { _ = p.rds.Close() })
		p.store.SetRedis(p.rds)
	}
	mailer, err := workers.NewSMTPMailer(workers.SMTPConfig{URL: p.cfg.SMTPURL, From: p.cfg.SMTPFrom})
	if err != nil {
		return err
	}
	p.mailer = mailer
	p.registry = p.app.registry(domain.BuiltinDeps{Mailer: mailer, HTTP: domain.HTTPConfig{Allow: p.cfg.HTTPAllow}})
	p.settings = &domain.SettingsHolder{}
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

// Waiting for PostgreSQL at start: the first retry after startRetryMin,
// each next one twice as late, up to startRetryMax.
const (
	startRetryMin = time.Second
	startRetryMax = 10 * time.Second
)

// untilReachable runs step (migrating, connecting) until it succeeds, or
// fails for a reason other than PostgreSQL being out of reach (a wrong
// password, a bad migration), or the process is told to stop. A server,
// API or worker started while the network or the primary is away (a
// partition, a failover, the whole stack booting at once) thus waits and
// starts by itself when PostgreSQL answers, as it rides the same outage
// out once running, instead of exiting for a supervisor to restart. It
// says so at each attempt. `flint migrate`, a one-shot command, does not
// wait: whatever runs it decides. A step that fails this way leaves
// nothing open (db.Open closes its pool; what open does after it cannot
// fail for want of PostgreSQL), so it is simply run again.
func (p *process) untilReachable(what string, step func() error) error {
	wait := startRetryMin
	for attempt := 1; ; attempt++ {
		err := step()
		if err == nil || p.roles.onlyOnce || !db.IsUnavailable(err) || p.ctx.Err() != nil {
			return err
		}
		p.logger.Warn("cannot reach PostgreSQL at start; trying again", "step", what, "attempt", attempt,
			"retry_in", wait.String(), "error", err)
		select {
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, startRetryMax)
	}
}

// stoppedBeforeStart is what run returns when migrating or connecting
// ended with err: nothing if a signal ended the wait for PostgreSQL.
func (p *process) stoppedBeforeStart(err error) error {
	if p.ctx.Err() != nil && (db.IsUnavailable(err) || errors.Is(err, context.Canceled)) {
		p.logger.Info("flint stopped before PostgreSQL could be reached")
		return nil
	}
	return err
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

// readyQueue reports whether workers take candidates from the Redis ready
// queue (FLINT_READY_QUEUE=redis, with Redis configured).
func (p *process) readyQueue() bool { return p.rds != nil && p.cfg.ReadyQueue == "redis" }

// redisState is Redis as /healthz and the metrics report it: disabled,
// ok or down.
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
