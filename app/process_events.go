package app

import (
	"context"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/metrics"
)

// startEvents runs the event bus: every process publishes its committed
// changes through Redis or NOTIFY; API processes deliver them to their SSE
// broker. Metrics see every event on the way.
func (p *process) startEvents() {
	var deliver func([]domain.Event)
	if p.roles.http {
		p.broker = handlers.NewBroker(10000)
		deliver = p.broker.Deliver
	}
	p.bus = db.NewEventBus(p.store, p.rds, p.readyQueue(), p.logger, deliver)
	p.mx = metrics.New(p.app.version())
	p.store.SetEventSink(p.mx.Tee(p.bus))
	p.mx.SetEventCounters(p.bus.Published, p.bus.Dropped)
	p.mx.SetRedisState(p.redisState)
	if p.roles.http {
		p.mx.SetStateSource(p.store.StateQueueCounts)
	}
	if p.roles.http || p.roles.scheduler {
		p.mx.SetTableSource(p.store.TableHealth)
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
