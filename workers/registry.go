package workers

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"time"

	"flint/jobs"
)

// RegistryStore is what the registry needs; *db.Store implements it.
type RegistryStore interface {
	RegisterWorker(ctx context.Context, w jobs.WorkerInfo, ttl time.Duration) error
	DeregisterWorker(ctx context.Context, id string) error
}

// TypeLister says which job types a process has handlers for;
// *jobs.Registry implements it.
type TypeLister interface {
	Types() []string
}

// Registry keeps this worker process registered while it runs: a
// heartbeat every Interval valid for TTL, and deregistration on stop.
// Each heartbeat says which job types the process can run, as its
// handlers are at that moment.
type Registry struct {
	info     jobs.WorkerInfo
	handlers TypeLister
	store    RegistryStore
	logger   *slog.Logger
	interval time.Duration
	ttl      time.Duration
	clock    jobs.Clock
}

// NewRegistry returns a registry for the process described by info, whose
// job types handlers lists (nil: info.Types as given); interval zero means
// 5 s and the TTL is three intervals. clock stamps the start and each
// heartbeat; nil means jobs.SystemClock.
func NewRegistry(info jobs.WorkerInfo, handlers TypeLister, interval time.Duration, store RegistryStore, clock jobs.Clock,
	logger *slog.Logger) *Registry {
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
	return &Registry{info: info, handlers: handlers, store: store, logger: logger.With("component", "registry", "worker_id", info.ID),
		interval: interval, ttl: 3 * interval, clock: clock}
}

// Run heartbeats until ctx is done, then deregisters.
func (r *Registry) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		info := r.info
		if r.handlers != nil {
			info.Types = r.handlers.Types()
		}
		info.HeartbeatAt = r.clock.Now()
		hctx, cancel := context.WithTimeout(ctx, r.interval)
		if err := r.store.RegisterWorker(hctx, info, r.ttl); err != nil && ctx.Err() == nil {
			r.logger.WarnContext(ctx, "worker heartbeat failed", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := r.store.DeregisterWorker(dctx, r.info.ID); err != nil {
				r.logger.WarnContext(dctx, "deregistering failed; the entry expires by itself", "error", err)
			}
			return nil
		case <-t.C:
		}
	}
}
