package scheduler

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// RetentionStore is what the pruner needs; *db.Store implements it.
type RetentionStore interface {
	// Prune deletes one batch (up to limit rows per kind) of finished jobs
	// past their retention and binned jobs past the bin's, judged at now
	// (nil: the database clock), and returns how many went.
	Prune(ctx context.Context, st domain.Settings, now *time.Time, limit int) (int, error)
	// PruneLogs deletes up to limit log entries older than days days
	// (0 or less: none) and returns how many went.
	PruneLogs(ctx context.Context, days int, now *time.Time, limit int) (int, error)
	// DropExpiredHistory drops the history's day partitions whose jobs are
	// all past their retention and returns their names.
	DropExpiredHistory(ctx context.Context, st domain.Settings, now *time.Time) ([]string, error)
}

// RetentionConfig configures a Pruner.
type RetentionConfig struct {
	// Interval between passes; zero means 1 min.
	Interval time.Duration
	// BatchSize is the most rows one statement deletes; zero means 1000.
	BatchSize int
}

// Pruner deletes finished jobs past their retention, purges the bin and
// deletes log entries past theirs, in small batches with SKIP LOCKED so
// that it never holds up the claim path.
type Pruner struct {
	cfg      RetentionConfig
	store    RetentionStore
	settings *domain.SettingsHolder
	logger   *slog.Logger
}

// NewPruner returns a pruner reading retention from settings.
func NewPruner(cfg RetentionConfig, store RetentionStore, settings *domain.SettingsHolder, logger *slog.Logger) *Pruner {
	cfg.Interval = cmp.Or(cfg.Interval, time.Minute)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	return &Pruner{cfg: cfg, store: store, settings: settings, logger: logger.With("component", "retention")}
}

// Run prunes every Interval until ctx is done; a pass that filled a batch
// runs again at once.
func (p *Pruner) Run(ctx context.Context) error {
	return runLoop(ctx, p.logger, p.cfg.Interval, p.runOnce)
}

func (p *Pruner) runOnce(ctx context.Context) (int, bool, error) {
	st := p.settings.Get()
	dropped, derr := p.store.DropExpiredHistory(ctx, st, nil)
	for _, d := range dropped {
		p.logger.InfoContext(ctx, "dropped a day of history past its retention", "partition", d)
	}
	n, err := p.store.Prune(ctx, st, nil, p.cfg.BatchSize)
	if n > 0 {
		p.logger.InfoContext(ctx, "pruned jobs past their retention", "count", n)
	}
	logged, lerr := p.store.PruneLogs(ctx, st.LogRetentionDays, nil, p.cfg.BatchSize)
	if logged > 0 {
		p.logger.InfoContext(ctx, "pruned log entries past their retention", "count", logged)
	}
	return n + logged, n >= p.cfg.BatchSize || logged >= p.cfg.BatchSize, errors.Join(derr, err, lerr)
}
