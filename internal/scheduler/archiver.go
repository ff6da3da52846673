package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

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
	// Archive moves up to limit jobs per final state that finished more
	// than after ago into the history and returns how many moved.
	Archive(ctx context.Context, after time.Duration, limit int) (int, error)
}

// Archiver moves finished jobs to the history history_after_minutes after
// they finished (0 in settings: it moves nothing). Several may run at once
// (SKIP LOCKED).
type Archiver struct {
	cfg      ArchiveConfig
	store    ArchiveStore
	settings *domain.SettingsHolder
	logger   *slog.Logger
}

// NewArchiver returns an archiver reading history_after_minutes from
// settings.
func NewArchiver(cfg ArchiveConfig, store ArchiveStore, settings *domain.SettingsHolder, logger *slog.Logger) *Archiver {
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
