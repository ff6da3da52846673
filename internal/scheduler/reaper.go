package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// ReaperStore is what the reaper needs; *db.Store implements it.
type ReaperStore interface {
	// ReapExpired requeues up to limit running jobs whose lease expired
	// before now (nil: the database clock), with the jobs that moved with
	// them (dependents cancelled or dead-lettered in cascade).
	ReapExpired(ctx context.Context, now *time.Time, limit int) ([]domain.Moved, error)
}

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Interval between passes; zero means 5 s.
	Interval time.Duration
	// BatchSize is the most jobs one statement reaps; zero means 1000.
	BatchSize int
	// OnMoved, if set, is called with the jobs each pass moved.
	OnMoved func([]domain.Moved)
}

// Reaper returns jobs whose lease expired (their worker crashed, hung or
// lost the database) to the queue.
type Reaper struct {
	cfg    ReaperConfig
	store  ReaperStore
	logger *slog.Logger
}

// NewReaper returns a reaper.
func NewReaper(cfg ReaperConfig, store ReaperStore, logger *slog.Logger) *Reaper {
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	return &Reaper{cfg: cfg, store: store, logger: logger.With("component", "reaper")}
}

// Run reaps every Interval until ctx is done.
func (r *Reaper) Run(ctx context.Context) error {
	return runLoop(ctx, r.logger, r.cfg.Interval, r.runOnce)
}

// runOnce reaps one batch. It reports how many jobs moved and whether the
// batch was full.
func (r *Reaper) runOnce(ctx context.Context) (int, bool, error) {
	moved, err := r.store.ReapExpired(ctx, nil, r.cfg.BatchSize)
	if err != nil {
		return 0, false, err
	}
	if len(moved) > 0 {
		r.logger.InfoContext(ctx, "reaped jobs with expired leases", "count", len(moved), "to", countByStatus(moved))
		if r.cfg.OnMoved != nil {
			r.cfg.OnMoved(moved)
		}
	}
	return len(moved), len(moved) == r.cfg.BatchSize, nil
}
