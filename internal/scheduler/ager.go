package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// AgerStore is what the ager needs; *db.Store implements it.
type AgerStore interface {
	// TakeTurn reports whether holder gets the named pass for the current
	// interval; of several processes asking, exactly one does.
	TakeTurn(ctx context.Context, name, holder string, interval time.Duration) (bool, error)
	// AgeQueued runs one aging step over up to limit waiting jobs and
	// returns how many it aged.
	AgeQueued(ctx context.Context, st domain.Settings, limit int) (int, error)
}

// AgerConfig configures an Ager.
type AgerConfig struct {
	// Holder names this process in the turn record. Required.
	Holder string
	// Tick is how often the ager checks whether a cycle is due; zero
	// means 1 s. The cycle itself is the aging_interval_seconds setting.
	Tick time.Duration
	// BatchSize is the most jobs one statement ages; zero means 5000.
	BatchSize int
}

// Ager applies priority aging once per aging interval across all
// scheduler processes: whichever takes the interval's turn ages every
// waiting medium and low job past its threshold by one step.
type Ager struct {
	cfg      AgerConfig
	store    AgerStore
	settings *domain.SettingsHolder
	logger   *slog.Logger
}

// NewAger returns an ager reading its parameters from settings.
func NewAger(cfg AgerConfig, store AgerStore, settings *domain.SettingsHolder, logger *slog.Logger) *Ager {
	cfg.Tick = cmp.Or(cfg.Tick, time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 5000)
	return &Ager{cfg: cfg, store: store, settings: settings, logger: logger.With("component", "ager")}
}

// Run ages until ctx is done.
func (a *Ager) Run(ctx context.Context) error {
	return runLoop(ctx, a.logger, a.cfg.Tick, func(ctx context.Context) (int, bool, error) {
		n, err := a.runOnce(ctx)
		return n, false, err
	})
}

// runOnce takes the cycle's turn if it is due and ages every eligible job.
func (a *Ager) runOnce(ctx context.Context) (int, error) {
	st := a.settings.Get()
	ok, err := a.store.TakeTurn(ctx, "ager", a.cfg.Holder, st.AgingInterval())
	if err != nil || !ok {
		return 0, err
	}
	total := 0
	for {
		n, err := a.store.AgeQueued(ctx, st, a.cfg.BatchSize)
		total += n
		if err != nil {
			return total, err
		}
		if n < a.cfg.BatchSize {
			break
		}
	}
	if total > 0 {
		a.logger.InfoContext(ctx, "aged waiting jobs", "count", total, "step", st.AgingStep)
	}
	return total, nil
}
