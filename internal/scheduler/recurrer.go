package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// RecurrerStore is what the recurrer needs; *db.Store implements it.
type RecurrerStore interface {
	// EnsureNextOccurrences gives up to limit series that lack one their
	// next pending occurrence and returns the occurrences created.
	EnsureNextOccurrences(ctx context.Context, limit int) ([]domain.Moved, error)
}

// RecurrerConfig configures a Recurrer.
type RecurrerConfig struct {
	// Interval between passes; zero means 1 s.
	Interval time.Duration
	// BatchSize is the most series one pass serves; zero means 500.
	BatchSize int
	// OnMoved, if set, is called with the occurrences each pass created.
	OnMoved func([]domain.Moved)
}

// Recurrer gives every recurring series that lacks one its next pending
// occurrence: after the pending one became due, after a restart, after a
// resume. The database allows a series one pending occurrence at a time, so
// any number of recurrers may run.
type Recurrer struct {
	cfg    RecurrerConfig
	store  RecurrerStore
	logger *slog.Logger
	kick   chan struct{}
}

// NewRecurrer returns a recurrer.
func NewRecurrer(cfg RecurrerConfig, store RecurrerStore, logger *slog.Logger) *Recurrer {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	return &Recurrer{cfg: cfg, store: store, logger: logger.With("component", "recurrer"), kick: make(chan struct{}, 1)}
}

// Kick asks for a pass now (an occurrence was just promoted).
func (r *Recurrer) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run serves series every Interval, or at once when kicked, until ctx is
// done.
func (r *Recurrer) Run(ctx context.Context) error {
	return runLoopKicked(ctx, r.logger, r.cfg.Interval, r.kick, r.runOnce)
}

// Settle makes the last passes of a scheduler that is stopping, once its
// promoter has stopped: an occurrence promoted just before the stop gets
// its successor now rather than when some scheduler next runs, so a clean
// stop leaves every series with its pending occurrence. It gives up when
// ctx ends.
func (r *Recurrer) Settle(ctx context.Context) {
	for {
		n, full, err := r.runOnce(ctx)
		if err != nil {
			r.logger.WarnContext(ctx, "last pass before stopping failed; the next scheduler to run makes it", "error", err)
			return
		}
		if n > 0 {
			r.logger.DebugContext(ctx, "last pass moved jobs", "count", n)
		}
		if !full {
			return
		}
	}
}

func (r *Recurrer) runOnce(ctx context.Context) (int, bool, error) {
	moved, err := r.store.EnsureNextOccurrences(ctx, r.cfg.BatchSize)
	if err != nil {
		return 0, false, err
	}
	if len(moved) > 0 {
		r.logger.DebugContext(ctx, "created next occurrences", "count", len(moved))
		if r.cfg.OnMoved != nil {
			r.cfg.OnMoved(moved)
		}
	}
	return len(moved), len(moved) == r.cfg.BatchSize, nil
}
