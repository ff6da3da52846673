package handlers

import (
	"context"
	"sync"

	"github.com/gofiber/fiber/v2"
)

// background is the loops a server runs beside its routes: writing API
// keys' last use (recordKeyUse), the remote workers' poll backstop
// (WorkHub.Run) and the dashboard's topic poll (watchTopics).
//
// They share one lifecycle with the app that New returns. They start in
// New, under a context derived from Config.BaseContext, so they stop when
// the caller's context is done, as the routes' request contexts do. The
// app's shutdown (Shutdown, ShutdownWithTimeout) stops them too, once the
// server has stopped serving, and waits until each has returned, so that
// none outlives the app: the key-use loop's last write lands before the
// caller closes the store.
//
// The loops cannot fail (each logs what goes wrong and tries again), so a
// WaitGroup holds them rather than an errgroup.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newBackground returns an empty set of loops that run until base is done
// or stop is called.
func newBackground(base context.Context) *background {
	ctx, cancel := context.WithCancel(base)
	return &background{ctx: ctx, cancel: cancel}
}

// run starts loop, which must return soon after its context is done.
func (b *background) run(loop func(ctx context.Context)) {
	b.wg.Go(func() { loop(b.ctx) })
}

// stop cancels the loops and waits until each has returned. It may be
// called more than once.
func (b *background) stop() error {
	b.cancel()
	b.wg.Wait()
	return nil
}

// startBackground starts the loops the configured routes need and ties
// them to app's shutdown.
func (s *server) startBackground(app *fiber.App) {
	b := newBackground(s.base)
	if s.access != nil {
		b.run(s.recordKeyUse)
	}
	if s.work != nil {
		hub, every := s.work.cfg.Hub, s.work.cfg.PollInterval
		b.run(func(ctx context.Context) { hub.Run(ctx, every) })
	}
	if s.dash != nil {
		b.run(s.watchTopics)
	}
	app.Hooks().OnShutdown(b.stop)
}
