package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"flint/jobs"
)

// PromoterStore is what the promoter needs; *db.Store implements it.
type PromoterStore interface {
	PromoteDue(ctx context.Context, now *time.Time, limit int) ([]jobs.Moved, error)
}

// PromoterConfig configures a Promoter.
type PromoterConfig struct {
	// Interval between passes; zero means 1 s.
	Interval time.Duration
	// BatchSize is the most jobs one statement promotes; zero means 1000.
	BatchSize int
	// OnMoved, if set, is called with the jobs each pass moved.
	OnMoved func([]jobs.Moved)
}

// Promoter moves scheduled jobs (delayed jobs and retries) whose time has
// come to queued.
type Promoter struct {
	cfg    PromoterConfig
	store  PromoterStore
	logger *slog.Logger
}

// NewPromoter returns a promoter.
func NewPromoter(cfg PromoterConfig, store PromoterStore, logger *slog.Logger) *Promoter {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	return &Promoter{cfg: cfg, store: store, logger: logger.With("component", "promoter")}
}

// Run promotes every Interval until ctx is done.
func (p *Promoter) Run(ctx context.Context) error {
	return runLoop(ctx, p.logger, p.cfg.Interval, p.runOnce)
}

func (p *Promoter) runOnce(ctx context.Context) (int, bool, error) {
	moved, err := p.store.PromoteDue(ctx, nil, p.cfg.BatchSize)
	if err != nil {
		return 0, false, err
	}
	if len(moved) > 0 && p.cfg.OnMoved != nil {
		p.cfg.OnMoved(moved)
	}
	return len(moved), len(moved) == p.cfg.BatchSize, nil
}
