package scheduler

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// PromoterStore is what the promoter needs; *db.Store implements it.
type PromoterStore interface {
	// PromoteDue moves up to limit scheduled jobs due by now (nil: the
	// database clock) to queued.
	PromoteDue(ctx context.Context, now *time.Time, limit int) ([]domain.Moved, error)
	// PromoteIDs promotes the given jobs if they are still scheduled and
	// due, or, but for waits for a signal or an event, due within ahead.
	PromoteIDs(ctx context.Context, ids []uuid.UUID, ahead time.Duration) ([]domain.Moved, error)
	// ScheduledTimers returns the given jobs that are still scheduled (all
	// of them when ids is nil, a page of limit after the id after), with
	// what the index needs.
	ScheduledTimers(ctx context.Context, ids []uuid.UUID, after uuid.UUID, limit int) ([]domain.Timer, error)
	// DatabaseNow returns the database clock, which decides what is due.
	DatabaseNow(ctx context.Context) (time.Time, error)
}

// PromoterConfig configures a Promoter.
type PromoterConfig struct {
	// Settings supplies scheduler_strategy; nil means the defaults.
	Settings *domain.SettingsHolder
	// MaxSleep caps how long the promoter sleeps when nothing is due soon,
	// so that a strategy change takes effect promptly; zero means 1 s.
	MaxSleep time.Duration
	// SweepInterval is the backstop: how often the promoter also asks the
	// database for due scheduled jobs its index may have missed (a
	// notification lost during a reconnect); zero means 15 s.
	SweepInterval time.Duration
	// ResyncInterval is how often the index is rebuilt from the database;
	// zero means 10 min.
	ResyncInterval time.Duration
	// BatchSize is the most jobs one statement promotes; zero means 1000.
	BatchSize int
	// Ahead is how long before their time scheduled jobs and sleepers are
	// promoted (see DefaultPromoteAhead); zero means DefaultPromoteAhead,
	// a negative value none.
	Ahead time.Duration
	// OnMoved, if set, is called with the jobs each pass promoted.
	OnMoved func([]domain.Moved)
	// Clock tells the time; nil means jobs.SystemClock. The promoter
	// reckons the database clock as Clock plus the offset it measured.
	Clock jobs.Clock
}

// DefaultPromoteAhead is how long before its time a scheduled job or a
// sleeper is queued. A queued job whose run_at is still ahead is claimed
// only into an in-process pool's buffer, whose worker starts its handler
// at run_at (workers.Pool), so the promotion's commit, the wake-up and
// the claim happen before the job's time rather than after it: the
// handler starts on time. Pull workers and push claim only jobs that are
// due, and the store wakes their queues again at run_at. A wait for a
// signal or an event is never ended early: its timeout is a result the
// handler reads, and a signal may still come.
const DefaultPromoteAhead = 250 * time.Millisecond

// Promoter moves scheduled jobs (delayed jobs, retries, recurring
// occurrences) to queued when their time comes. It fires them from an
// in-memory index — a heap or a timing wheel, as the scheduler_strategy
// setting says — loaded from PostgreSQL and kept current by notifications,
// so due work is promoted within moments without polling the table. The
// database stays the truth: every promotion is guarded by the row's state
// and due time, the index is rebuilt on start, on reconnect, on a strategy
// change and periodically, and a slow sweep catches anything it missed.
// Any number of promoters may run.
type Promoter struct {
	cfg    PromoterConfig
	store  PromoterStore
	logger *slog.Logger

	mu       sync.Mutex
	idx      Index
	loading  bool          // a rebuild is reading the database
	arrived  []Entry       // entries notified during the rebuild
	offset   time.Duration // database clock minus local clock
	resync   bool
	kick     chan struct{}
	sweepDue time.Time // see nextSweep
}

// NewPromoter returns a promoter.
func NewPromoter(cfg PromoterConfig, store PromoterStore, logger *slog.Logger) *Promoter {
	cfg.MaxSleep = cmp.Or(cfg.MaxSleep, time.Second)
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, 15*time.Second)
	cfg.ResyncInterval = cmp.Or(cfg.ResyncInterval, 10*time.Minute)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	cfg.Ahead = max(cmp.Or(cfg.Ahead, DefaultPromoteAhead), 0)
	if cfg.Settings == nil {
		cfg.Settings = &domain.SettingsHolder{}
	}
	if cfg.Clock == nil {
		cfg.Clock = jobs.SystemClock{}
	}
	return &Promoter{cfg: cfg, store: store, logger: logger.With("component", "promoter"), kick: make(chan struct{}, 1)}
}

// Strategy returns the strategy of the index in use ("" before Run).
func (p *Promoter) Strategy() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idx == nil {
		return ""
	}
	return p.idx.Name()
}

// Len returns how many scheduled jobs the index holds.
func (p *Promoter) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idx == nil {
		return 0
	}
	return p.idx.Len()
}

// Notify takes a ChannelScheduled payload: jobs that became scheduled.
func (p *Promoter) Notify(payload string) {
	timers := parseTimers(payload)
	if len(timers) == 0 {
		return
	}
	p.mu.Lock()
	for _, t := range timers {
		if p.idx != nil {
			p.idx.Upsert(Entry(t))
		}
		if p.loading {
			p.arrived = append(p.arrived, Entry(t))
		}
	}
	p.mu.Unlock()
	p.wake()
}

// Resync asks for the index to be rebuilt from the database, as after a
// reconnect of the notification listener (notifications meanwhile were
// lost).
func (p *Promoter) Resync() {
	p.mu.Lock()
	p.resync = true
	p.mu.Unlock()
	p.wake()
}

func (p *Promoter) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run promotes until ctx is done.
func (p *Promoter) Run(ctx context.Context) error {
	p.logger.DebugContext(ctx, "promoter started")
	lastLoad := time.Time{}
	for ctx.Err() == nil {
		strategy := p.cfg.Settings.Get().SchedulerStrategy
		p.mu.Lock()
		needLoad := p.idx == nil || p.idx.Name() != strategy || p.resync || p.cfg.Clock.Now().Sub(lastLoad) > p.cfg.ResyncInterval
		from := ""
		if p.idx != nil {
			from = p.idx.Name()
		}
		p.mu.Unlock()
		if needLoad {
			if err := p.load(ctx, strategy); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				p.logger.WarnContext(ctx, "loading scheduled jobs failed; retrying", "error", err)
				p.sleep(ctx, time.Second)
				continue
			}
			lastLoad = p.cfg.Clock.Now()
			if from != "" && from != strategy {
				p.logger.InfoContext(ctx, "scheduling strategy switched", "from", from, "to", strategy, "entries", p.Len())
			}
		}
		if err := p.runOnce(ctx); err != nil && ctx.Err() == nil {
			p.logger.WarnContext(ctx, "promotion failed", "error", err)
			p.sleep(ctx, 200*time.Millisecond)
			continue
		}
		p.sleep(ctx, p.untilNext())
	}
	return nil
}

// sleep waits for d, a kick, or ctx.
func (p *Promoter) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-p.kick:
	case <-t.C:
	}
}

// now is the database clock as this process reckons it.
func (p *Promoter) now() time.Time { return p.cfg.Clock.Now().Add(p.offset) }

// horizon is how far the index is promoted: now plus Ahead.
func (p *Promoter) horizon() time.Time { return p.now().Add(p.cfg.Ahead) }

// untilNext is how long to sleep: until the earliest entry is due, at most
// MaxSleep.
func (p *Promoter) untilNext() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	next, ok := p.idx.NextDue()
	if !ok {
		return p.cfg.MaxSleep
	}
	return min(max(next.Sub(p.horizon()), 0), p.cfg.MaxSleep)
}

// load rebuilds the index of the given strategy from the database.
func (p *Promoter) load(ctx context.Context, strategy string) error {
	dbNow, err := p.store.DatabaseNow(ctx)
	if err != nil {
		return err
	}
	offset := dbNow.Sub(p.cfg.Clock.Now())
	idx, err := NewIndex(strategy, dbNow)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.loading, p.arrived = true, nil
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.loading, p.arrived = false, nil
		p.mu.Unlock()
	}()
	after := uuid.Nil
	for {
		page, err := p.store.ScheduledTimers(ctx, nil, after, 10000)
		if err != nil {
			return err
		}
		for _, t := range page {
			idx.Upsert(Entry(t))
		}
		if len(page) < 10000 {
			break
		}
		after = page[len(page)-1].ID
	}
	p.mu.Lock()
	// Jobs notified while the pages were read may be missing from them.
	for _, e := range p.arrived {
		idx.Upsert(e)
	}
	p.idx, p.offset, p.resync = idx, offset, false
	p.mu.Unlock()
	return nil
}

// runOnce promotes what is due: from the index at once, and from the
// database every SweepInterval.
func (p *Promoter) runOnce(ctx context.Context) error {
	for ctx.Err() == nil {
		p.mu.Lock()
		due := p.idx.PopDue(p.horizon(), p.cfg.BatchSize)
		p.mu.Unlock()
		if len(due) == 0 {
			break
		}
		ids := make([]uuid.UUID, len(due))
		for i, e := range due {
			ids[i] = e.ID
		}
		sctx, cancel := statementContext(ctx)
		moved, err := p.store.PromoteIDs(sctx, ids, p.cfg.Ahead)
		cancel()
		if err != nil {
			p.putBack(due)
			return err
		}
		p.report(moved)
		if len(moved) < len(due) {
			// Not promoted: cancelled, deleted, already promoted elsewhere,
			// not due by the database's clock yet, or a wait for a signal
			// or an event, which ends at its time and not Ahead before.
			// Those still scheduled or waiting go back to be taken again
			// at their stored time (Ahead later in the index's terms).
			promoted := make(map[uuid.UUID]bool, len(moved))
			for _, m := range moved {
				promoted[m.JobID] = true
			}
			var rest []uuid.UUID
			for _, id := range ids {
				if !promoted[id] {
					rest = append(rest, id)
				}
			}
			timers, err := p.store.ScheduledTimers(ctx, rest, uuid.Nil, 0)
			if err != nil {
				return err
			}
			p.mu.Lock()
			floor := p.now().Add(50 * time.Millisecond)
			for _, t := range timers {
				if t.RunAt.Before(floor) {
					t.RunAt = floor // not yet due by the database: look again shortly
				}
				t.RunAt = t.RunAt.Add(p.cfg.Ahead)
				p.idx.Upsert(Entry(t))
			}
			p.mu.Unlock()
		}
		if len(due) < p.cfg.BatchSize {
			break
		}
	}
	if now := p.cfg.Clock.Now(); now.After(p.nextSweep()) {
		for ctx.Err() == nil {
			sctx, cancel := statementContext(ctx)
			moved, err := p.store.PromoteDue(sctx, nil, p.cfg.BatchSize)
			cancel()
			if err != nil {
				return err
			}
			if len(moved) > 0 {
				p.logger.InfoContext(ctx, "sweep promoted jobs the index did not hold", "count", len(moved))
				p.report(moved)
			}
			if len(moved) < p.cfg.BatchSize {
				break
			}
		}
		p.mu.Lock()
		p.sweepDue = now.Add(p.cfg.SweepInterval)
		p.mu.Unlock()
	}
	return nil
}

// statementContext is ctx for a promotion: a stop does not cut a
// promotion short (the stopping scheduler's recurrer settles after the
// last one, see Recurrer.Settle), but no promotion outlasts 10 s.
func statementContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// nextSweep is when the next sweep of the database is due: at once
// before the first, and SweepInterval after the last that succeeded.
func (p *Promoter) nextSweep() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sweepDue
}

func (p *Promoter) putBack(entries []Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range entries {
		p.idx.Upsert(e)
	}
}

func (p *Promoter) report(moved []domain.Moved) {
	if len(moved) > 0 && p.cfg.OnMoved != nil {
		p.cfg.OnMoved(moved)
	}
}
