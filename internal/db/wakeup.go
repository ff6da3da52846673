package db

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Wake-ups leave the transaction.
//
// PostgreSQL serializes the commits of every transaction that called
// pg_notify on one cluster-wide lock (the "Lock:object" wait in
// pg_stat_activity), held across the commit's WAL flush. A notification
// inside every enqueue and finish made those commits take turns, one WAL
// flush each, whatever the number of connections. So the statements that
// move jobs no longer notify: the store queues the wake-up once the change
// has committed, and a waker sends what has gathered in one statement of
// its own, at most one per WakeupWindow. A burst of a thousand enqueues to
// one queue costs one notification, and no job transaction waits on the
// lock.
//
// A wake-up is a hint: it is sent after the commit, so a process that dies
// in between, or a send that fails, loses it. Every consumer has a polling
// backstop (workers poll every FLINT_POLL_INTERVAL, the promoter sweeps
// every FLINT_PROMOTE_INTERVAL), which is what bounds pickup when a
// notification is lost; the notification only makes pickup fast.

// DefaultWakeupWindow is the shortest time between two notification
// statements of one store: a busy process sends at most 500 a second.
const DefaultWakeupWindow = 2 * time.Millisecond

// notifyManySQL sends one notification per (channel, payload) pair.
const notifyManySQL = `SELECT count(pg_notify(c, m)) FROM unnest($1::text[], $2::text[]) AS n(c, m)`

// note is one notification waiting to be sent.
type note struct{ channel, payload string }

// waker gathers wake-ups and sends them after the changes they announce
// have committed.
type waker struct {
	pool   *pgxpool.Pool
	window time.Duration
	logger *slog.Logger

	mu      sync.Mutex
	queues  map[string]bool // ChannelJobs: queues that gained queued jobs
	timers  []string        // ChannelScheduled parts, "id run_ms priority created_us"
	others  []note          // any other channel, in order
	pending bool
	drop    func(channel, payload string) bool

	kick    chan struct{}
	stop    context.CancelFunc
	stopped chan struct{}
	sent    atomic.Uint64 // notification statements sent
	failed  atomic.Uint64 // notification statements that failed
}

func newWaker(pool *pgxpool.Pool, window time.Duration) *waker {
	if window <= 0 {
		window = DefaultWakeupWindow
	}
	return &waker{
		pool: pool, window: window, logger: slog.New(slog.DiscardHandler),
		queues: map[string]bool{}, kick: make(chan struct{}, 1), stopped: make(chan struct{}),
	}
}

// start runs the sender until close.
func (w *waker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go func() {
		defer close(w.stopped)
		w.run(ctx)
	}()
}

// close sends what is still waiting and stops the sender.
func (w *waker) close() {
	if w.stop != nil {
		w.stop()
		<-w.stopped
	}
}

func (w *waker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			w.flush(ctx)
			return
		case <-w.kick:
		}
		w.flush(ctx)
		// What arrives from now on waits for the window's end and goes
		// out together.
		select {
		case <-ctx.Done():
		case <-time.After(w.window):
		}
	}
}

// flush sends everything pending in one statement.
func (w *waker) flush(ctx context.Context) {
	channels, payloads := w.take()
	if len(channels) == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := w.pool.Exec(sctx, notifyManySQL, channels, payloads); err != nil {
		w.failed.Add(1)
		w.logger.WarnContext(ctx, "sending wake-ups failed; workers fall back to polling", "error", err)
		return
	}
	w.sent.Add(1)
}

// take empties the pending set into the arguments of notifyManySQL.
func (w *waker) take() (channels, payloads []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	add := func(channel, payload string) {
		if w.drop != nil && w.drop(channel, payload) {
			return
		}
		channels, payloads = append(channels, channel), append(payloads, payload)
	}
	for q := range w.queues {
		add(ChannelJobs, q)
	}
	clear(w.queues)
	for len(w.timers) > 0 {
		chunk := w.timers[:min(90, len(w.timers))]
		w.timers = w.timers[len(chunk):]
		add(ChannelScheduled, strings.Join(chunk, ","))
	}
	w.timers = nil
	for _, n := range w.others {
		add(n.channel, n.payload)
	}
	w.others = nil
	w.pending = false
	return channels, payloads
}

// signal wakes the sender; the caller holds mu.
func (w *waker) signal() {
	if w.pending {
		return
	}
	w.pending = true
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// add queues the wake-ups of one commit, all at once so that they go out
// together: the workers of queues, and the schedulers' index of timers
// (parts of a ChannelScheduled payload).
func (w *waker) add(queues, timers []string) {
	if len(queues) == 0 && len(timers) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range queues {
		w.queues[q] = true
	}
	w.timers = append(w.timers, timers...)
	w.signal()
}

// timerPart is a scheduled job as a ChannelScheduled payload lists it:
// "id run_ms priority created_us", run time rounded to the millisecond.
func timerPart(id uuid.UUID, runAt time.Time, priority float64, created time.Time) string {
	return fmt.Sprintf("%s %d %v %d", id, (runAt.UnixMicro()+500)/1000, priority, created.UnixMicro())
}

// other queues a notification on any other channel.
func (w *waker) other(channel, payload string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.others = append(w.others, note{channel, payload})
	w.signal()
}

// wakeJobs sends, after the commit that stored them, the wake-ups for jobs
// that became queued or scheduled.
func (s *Store) wakeJobs(js ...*jobs.Job) {
	var queues, timers []string
	for _, j := range js {
		switch j.Status {
		case jobs.StateQueued:
			queues = append(queues, j.Queue)
		case jobs.StateScheduled, jobs.StateWaiting:
			timers = append(timers, timerPart(j.ID, j.RunAt, j.EffectivePriority, j.CreatedAt))
		}
	}
	s.waker.add(queues, timers)
}

// wakeMoved is wakeJobs for moves.
func (s *Store) wakeMoved(moved []domain.Moved) {
	var queues, timers []string
	for _, m := range moved {
		switch m.Status {
		case jobs.StateQueued:
			queues = append(queues, m.Queue)
		case jobs.StateScheduled, jobs.StateWaiting: // a waiting job's run_at is when its wait ends
			timers = append(timers, timerPart(m.JobID, m.RunAt, m.EffectivePriority, m.CreatedAt))
		}
	}
	s.waker.add(queues, timers)
}

// wakeAtRunAt wakes, at their run_at, the queues of jobs moved to queued
// ahead of it (Store.PromoteIDs), on ChannelDue: pull workers and push deliveries woken
// at the promotion found nothing due and wait for the next wake-up. One
// timer per millisecond of run_at, on this process's clock (a clock that
// disagrees with the database's moves the wake-up, never the job's time:
// their polling remains the backstop).
func (s *Store) wakeAtRunAt(moved []domain.Moved) {
	now := time.Now()
	at := map[int64][]string{}
	for _, m := range moved {
		if m.Status == jobs.StateQueued && m.RunAt.After(now) {
			ms := (m.RunAt.UnixMicro() + 999) / 1000
			at[ms] = append(at[ms], m.Queue)
		}
	}
	for ms, queues := range at {
		slices.Sort(queues)
		queues = slices.Compact(queues)
		time.AfterFunc(time.Until(time.UnixMilli(ms)), func() {
			for _, q := range queues {
				s.waker.other(ChannelDue, q)
			}
		})
	}
}

// wakeCancel tells the worker running job id that its cancellation was
// requested.
func (s *Store) wakeCancel(id uuid.UUID) { s.waker.other(ChannelCancel, id.String()) }

// SetWakeupFilter installs a fault for tests: wake-ups for which drop
// returns true are never sent, as if lost with a dying process. nil sends
// everything again.
func (s *Store) SetWakeupFilter(drop func(channel, payload string) bool) {
	s.waker.mu.Lock()
	defer s.waker.mu.Unlock()
	s.waker.drop = drop
}

// SetLogger gives the store a logger for what it does in the background
// (sending wake-ups). Call it before the store is used concurrently.
func (s *Store) SetLogger(logger *slog.Logger) {
	s.waker.logger = logger.With("component", "wakeup")
}

// WakeupsSent returns how many notification statements the store sent, and
// how many failed.
func (s *Store) WakeupsSent() (sent, failed uint64) {
	return s.waker.sent.Load(), s.waker.failed.Load()
}

// notifySink publishes events as ChannelEvents notifications through the
// waker, after their changes commit: for a process without an event bus
// (a Go client), whose jobs the API processes must still hear of.
type notifySink struct{ w *waker }

func (n notifySink) Publish(events []domain.Event) {
	for _, p := range notifyPayloads("tx", events) {
		n.w.other(ChannelEvents, p)
	}
}

// NotifyEventSink returns a sink that announces events over PostgreSQL
// NOTIFY, sent by the store's waker after the changes commit.
func (s *Store) NotifyEventSink() domain.EventSink { return notifySink{s.waker} }
