package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// VacuumStore is what the vacuumer needs; *db.Store implements it.
type VacuumStore interface {
	// TakeTurn reports whether holder gets the named pass for the current
	// interval; of several processes asking, exactly one does.
	TakeTurn(ctx context.Context, name, holder string, interval time.Duration) (bool, error)
	// TableHealth returns PostgreSQL's live and dead row versions of the
	// jobs tables and when they were last vacuumed.
	TableHealth(ctx context.Context) ([]domain.TableHealth, error)
	// VacuumJobs runs VACUUM (ANALYZE) on the jobs table.
	VacuumJobs(ctx context.Context) error
}

// VacuumConfig configures a Vacuumer.
type VacuumConfig struct {
	// Holder names this process in the turn record. Required.
	Holder string
	// Interval between checks; zero means 30 s.
	Interval time.Duration
	// DeadTuples is the dead row versions of jobs above which it is
	// vacuumed, on top of DeadFraction of its live rows; zero means
	// 20,000.
	DeadTuples int64
	// DeadFraction is the share of live rows added to DeadTuples; zero
	// means 0.05.
	DeadFraction float64
	// Quiet is how long after any VACUUM of jobs (Flint's or autovacuum's)
	// the vacuumer leaves it alone, however many dead versions it holds:
	// those a VACUUM just left are held by an older transaction, and
	// another VACUUM would not remove them either. Zero means 1 min.
	Quiet time.Duration
}

// Vacuumer keeps the jobs table healthy whatever autovacuum does. Every
// claim and every finish leaves a dead version of the job's row; a table
// that nobody vacuums (autovacuum off, or behind after a burst of
// archiving) makes every claim walk them. Once per interval across the
// cluster it reads PostgreSQL's statistics and, when the dead versions
// pass the threshold and no VACUUM ran within Quiet, runs VACUUM (ANALYZE)
// on jobs. Autovacuum, when it keeps up, leaves it nothing to do.
type Vacuumer struct {
	cfg    VacuumConfig
	store  VacuumStore
	clock  jobs.Clock
	logger *slog.Logger
}

// NewVacuumer returns a vacuumer; clock nil means the system clock.
func NewVacuumer(cfg VacuumConfig, store VacuumStore, clock jobs.Clock, logger *slog.Logger) *Vacuumer {
	cfg.Interval = cmp.Or(cfg.Interval, 30*time.Second)
	cfg.DeadTuples = cmp.Or(cfg.DeadTuples, 20_000)
	cfg.DeadFraction = cmp.Or(cfg.DeadFraction, 0.05)
	cfg.Quiet = cmp.Or(cfg.Quiet, time.Minute)
	if clock == nil {
		clock = jobs.SystemClock{}
	}
	return &Vacuumer{cfg: cfg, store: store, clock: clock, logger: logger.With("component", "vacuumer")}
}

// Run checks every Interval until ctx is done.
func (v *Vacuumer) Run(ctx context.Context) error {
	return runLoop(ctx, v.logger, v.cfg.Interval, func(pctx context.Context) (int, bool, error) {
		_, err := v.pass(pctx, ctx)
		return 0, false, err
	})
}

// runOnce takes the interval's turn and vacuums jobs if it needs it. It
// reports whether it did.
func (v *Vacuumer) runOnce(ctx context.Context) (bool, error) { return v.pass(ctx, ctx) }

// pass is runOnce with the VACUUM bounded by long (a VACUUM of a large
// table outlasts a pass's timeout; it still stops with the process).
func (v *Vacuumer) pass(ctx, long context.Context) (bool, error) {
	ok, err := v.store.TakeTurn(ctx, "vacuum", v.cfg.Holder, v.cfg.Interval)
	if err != nil || !ok {
		return false, err
	}
	tables, err := v.store.TableHealth(ctx)
	if err != nil {
		return false, err
	}
	for _, h := range tables {
		if h.Table != "jobs" || !v.due(h) {
			continue
		}
		vctx, cancel := context.WithTimeout(long, time.Hour)
		start := v.clock.Now()
		err := v.store.VacuumJobs(vctx)
		cancel()
		if err != nil {
			return false, err
		}
		v.logger.InfoContext(ctx, "vacuumed the jobs table", "dead_tuples", h.DeadTuples, "live_tuples", h.LiveTuples,
			"took", v.clock.Now().Sub(start).Round(time.Millisecond))
		return true, nil
	}
	return false, nil
}

// due reports whether h's dead versions pass the threshold with no VACUUM
// within Quiet.
func (v *Vacuumer) due(h domain.TableHealth) bool {
	if float64(h.DeadTuples) < float64(v.cfg.DeadTuples)+v.cfg.DeadFraction*float64(h.LiveTuples) {
		return false
	}
	last := h.LastVacuumed()
	return last == nil || v.clock.Now().Sub(*last) >= v.cfg.Quiet
}
