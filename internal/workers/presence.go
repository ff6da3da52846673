package workers

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// PresenceStore is what Presence needs to keep the process's entry in the
// worker registry; *db.Store implements it.
type PresenceStore interface {
	// RegisterWorker writes (or refreshes) the entry w, valid for ttl.
	RegisterWorker(ctx context.Context, w domain.WorkerInfo, ttl time.Duration) error
	// DeregisterWorker removes the entry with the given worker id.
	DeregisterWorker(ctx context.Context, id string) error
}

// TypeLister says which job types a process has handlers for;
// *jobs.Registry implements it.
type TypeLister interface {
	// Types returns the job types with a handler, sorted.
	Types() []string
}

// Presence keeps this worker process's entry in the worker registry alive
// while it runs: a heartbeat every interval valid for three intervals, and
// deregistration on stop. Each heartbeat says which job types the process
// can run, as its handlers are at that moment, so the API knows which live
// workers serve a type.
//
// Presence is not the job type registry (that is jobs.Registry); it only
// announces this process to the others.
type Presence struct {
	info     domain.WorkerInfo
	handlers TypeLister
	store    PresenceStore
	logger   *slog.Logger
	interval time.Duration
	ttl      time.Duration
	clock    jobs.Clock
}

// NewPresence returns the presence of the process described by info, whose
// job types handlers lists (nil: info.Types as given); interval zero means
// 5 s and the TTL is three intervals. An empty info.Host, zero info.PID or
// zero info.StartedAt are filled from the running process. clock stamps the
// start and each heartbeat; nil means jobs.SystemClock.
func NewPresence(info domain.WorkerInfo, handlers TypeLister, interval time.Duration, store PresenceStore, clock jobs.Clock,
	logger *slog.Logger) *Presence {
	if clock == nil {
		clock = jobs.SystemClock{}
	}
	interval = cmp.Or(interval, 5*time.Second)
	if info.Host == "" {
		info.Host, _ = os.Hostname()
	}
	if info.PID == 0 {
		info.PID = os.Getpid()
	}
	if info.StartedAt.IsZero() {
		info.StartedAt = clock.Now()
	}
	return &Presence{info: info, handlers: handlers, store: store, logger: logger.With("component", "presence", "worker_id", info.ID),
		interval: interval, ttl: 3 * interval, clock: clock}
}

// Run heartbeats until ctx is done, then deregisters (with its own 5 s
// deadline, since ctx is already done by then). A failed heartbeat is
// logged and retried at the next interval. Run always returns nil.
func (p *Presence) Run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		info := p.info
		if p.handlers != nil {
			info.Types = p.handlers.Types()
		}
		info.HeartbeatAt = p.clock.Now()
		hctx, cancel := context.WithTimeout(ctx, p.interval)
		if err := p.store.RegisterWorker(hctx, info, p.ttl); err != nil && ctx.Err() == nil {
			p.logger.WarnContext(ctx, "worker heartbeat failed", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := p.store.DeregisterWorker(dctx, p.info.ID); err != nil {
				p.logger.WarnContext(dctx, "deregistering failed; the entry expires by itself", "error", err)
			}
			return nil
		case <-t.C:
		}
	}
}
