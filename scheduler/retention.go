package scheduler

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"flint/jobs"
)

// RetentionStore is what the pruner needs; *db.Store implements it.
type RetentionStore interface {
	Prune(ctx context.Context, st jobs.Settings, now *time.Time, limit int) (int, error)
	PruneLogs(ctx context.Context, days int, now *time.Time, limit int) (int, error)
	DropExpiredHistory(ctx context.Context, st jobs.Settings, now *time.Time) ([]string, error)
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
	settings *jobs.SettingsHolder
	logger   *slog.Logger
}

// NewPruner returns a pruner reading retention from settings.
func NewPruner(cfg RetentionConfig, store RetentionStore, settings *jobs.SettingsHolder, logger *slog.Logger) *Pruner {
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

// ArchiveConfig configures an Archiver.
type ArchiveConfig struct {
	// Interval between passes; zero means 5 s. Short, so that finished
	// jobs leave the live table in small, steady batches rather than in
	// bursts that VACUUM then has to catch up with.
	Interval time.Duration
	// BatchSize is the most jobs of a state one statement moves; zero
	// means 2000.
	BatchSize int
}

// ArchiveStore is what the archiver needs; *db.Store implements it.
type ArchiveStore interface {
	Archive(ctx context.Context, after time.Duration, limit int) (int, error)
}

// Archiver moves finished jobs to the history history_after_minutes after
// they finished (0 in settings: it moves nothing). Several may run at once
// (SKIP LOCKED).
type Archiver struct {
	cfg      ArchiveConfig
	store    ArchiveStore
	settings *jobs.SettingsHolder
	logger   *slog.Logger
}

// NewArchiver returns an archiver reading history_after_minutes from
// settings.
func NewArchiver(cfg ArchiveConfig, store ArchiveStore, settings *jobs.SettingsHolder, logger *slog.Logger) *Archiver {
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 2000)
	return &Archiver{cfg: cfg, store: store, settings: settings, logger: logger.With("component", "history")}
}

// Run moves jobs every Interval until ctx is done; a pass that filled a
// batch runs again at once.
func (a *Archiver) Run(ctx context.Context) error {
	return runLoop(ctx, a.logger, a.cfg.Interval, a.runOnce)
}

func (a *Archiver) runOnce(ctx context.Context) (int, bool, error) {
	after := a.settings.Get().HistoryAfterMinutes
	if after <= 0 {
		return 0, false, nil
	}
	n, err := a.store.Archive(ctx, time.Duration(after)*time.Minute, a.cfg.BatchSize)
	return n, n >= a.cfg.BatchSize, err
}
