package workers

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// The pusher delivers the jobs of push queues to their endpoints, as Cloud
// Tasks and QStash do: it claims them like any worker (so flow control,
// leases, retries and the DLQ apply), POSTs each, signed by the Standard
// Webhooks scheme, and records the outcome the answer gives:
//
//	2xx                      completed; a JSON body up to 64 KiB is the result,
//	                         less a "spawn" list of jobs to add to the job's
//	                         workflow with its completion
//	202                      the endpoint took the job and finishes it through
//	                         POST /api/v1/jobs/{id}/finish with the lease token
//	                         (and a work key of the queue); its heartbeats
//	                         (/heartbeat) keep the lease
//	Flint-No-Retry: true     failed for good (DLQ), whatever the status
//	410                      failed for good, and the queue's push paused
//	anything else, no answer failed and retried with backoff, honouring
//	                         Retry-After; a 429 or 503 also holds the whole
//	                         queue back that long
//
// Redirects are not followed, and the SSRF guard of http_request decides
// which addresses may be reached.

// PushStore is what the pusher needs from storage; *db.Store implements
// it.
type PushStore interface {
	// PushQueues returns every queue that pushes its jobs, with its
	// endpoint, secrets and holds.
	PushQueues(ctx context.Context) ([]domain.PushQueue, error)
	// ClaimJobs, ExtendLeases and FinishJobs are as for a Pool's Store.
	ClaimJobs(ctx context.Context, p domain.ClaimParams) ([]*jobs.Job, error)
	ExtendLeases(ctx context.Context, beats []domain.Heartbeat, ttl time.Duration) ([]domain.LeaseStatus, error)
	FinishJobs(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error)
	// HoldPush holds queue's pushes back until the given time, in every
	// process (the endpoint answered 429 or 503).
	HoldPush(ctx context.Context, queue string, until time.Time) error
	// PausePush stops pushing queue until its push is set again (the
	// endpoint answered 410).
	PausePush(ctx context.Context, queue, reason string) error
	// RecordPushDeliveries keeps the deliveries for the queue's page.
	RecordPushDeliveries(ctx context.Context, ds []domain.PushDelivery) error
}

// PusherConfig configures a Pusher. Zero values mean the defaults given.
type PusherConfig struct {
	// WorkerID names the pusher in leases and executions. Required.
	WorkerID string
	// MaxInFlight caps the requests open at once; zero means 100.
	MaxInFlight int
	// LeaseTTL, HeartbeatInterval and PollInterval are as for a Pool
	// (zero: 30 s, 5 s, 1 s); DrainTimeout is how long open requests may
	// finish on shutdown (zero: 30 s).
	LeaseTTL, HeartbeatInterval, PollInterval, DrainTimeout time.Duration
	// Allow opens destinations the SSRF guard refuses (FLINT_HTTP_ALLOW).
	Allow []string
	// OnMoved, if set, is told of the jobs outcomes moved.
	OnMoved func([]domain.Moved)
	// Types says which types the jobs an endpoint spawns may name (see
	// domain.ParseSpawn); nil accepts none but the built-in ones.
	Types jobs.TypeSource
}

// Pusher POSTs the jobs of push queues to their endpoints.
type Pusher struct {
	cfg    PusherConfig
	store  PushStore
	client *domain.GuardedClient
	logger *slog.Logger

	notify chan struct{} // a push queue gained jobs (cap 1)
	reload chan struct{} // push settings changed (cap 1)
	freed  chan struct{} // a delivery ended (cap 1)

	mu       sync.Mutex
	queues   map[string]domain.PushQueue
	held     map[string]time.Time // holds this process set or read
	inFlight map[uuid.UUID]*delivery
	wg       sync.WaitGroup
	open     atomic.Int64

	outcomes chan pushOutcome
}

// delivery is one job being pushed.
type delivery struct {
	job    *jobs.Job
	lease  domain.Lease
	cancel context.CancelCauseFunc
	lost   atomic.Bool
}

// pushOutcome is what one delivery leaves to write: a finish (nil when
// the endpoint took the job, 202) and the record for the queue's page.
type pushOutcome struct {
	finish *domain.Finish
	record domain.PushDelivery
}

// errPushShutdown cancels open requests once the drain timeout is out.
var errPushShutdown = errors.New("push interrupted: the pushing process shut down")

// NewPusher returns a pusher; call Run to start it.
func NewPusher(cfg PusherConfig, store PushStore, logger *slog.Logger) (*Pusher, error) {
	cfg.MaxInFlight = cmp.Or(cfg.MaxInFlight, 100)
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, 30*time.Second)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, 5*time.Second)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, 30*time.Second)
	client, err := domain.NewGuardedClient(cfg.Allow, 0) // each request has its queue's timeout
	if err != nil {
		return nil, err
	}
	client.KeepAlive(cfg.MaxInFlight)
	return &Pusher{
		cfg: cfg, store: store, client: client,
		logger:   logger.With("component", "pusher", "worker_id", cfg.WorkerID),
		notify:   make(chan struct{}, 1),
		reload:   make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		queues:   map[string]domain.PushQueue{},
		held:     map[string]time.Time{},
		inFlight: map[uuid.UUID]*delivery{},
		outcomes: make(chan pushOutcome, cfg.MaxInFlight),
	}, nil
}

// Wake tells the pusher that queue gained queued jobs ("" for unknown).
func (p *Pusher) Wake(queue string) {
	if queue != "" {
		p.mu.Lock()
		_, ok := p.queues[queue]
		p.mu.Unlock()
		if !ok {
			return
		}
	}
	signal(p.notify)
}

// Reload tells the pusher that queue settings changed.
func (p *Pusher) Reload() { signal(p.reload) }

// InFlight returns how many requests are open.
func (p *Pusher) InFlight() int { return int(p.open.Load()) }

// Run pushes until ctx is done, then lets open requests finish within the
// drain timeout, hands the rest back to their queues uncharged, writes
// every outcome and returns.
func (p *Pusher) Run(ctx context.Context) error {
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		p.finisher()
	}()
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	beatsDone := make(chan struct{})
	go func() {
		defer close(beatsDone)
		p.heartbeats(beatCtx)
	}()

	p.loadQueues(ctx)
	p.produce(ctx)

	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(p.cfg.DrainTimeout):
		p.logger.Warn("push drain timeout reached; interrupting open requests", "open", p.InFlight())
		p.mu.Lock()
		for _, d := range p.inFlight {
			d.cancel(errPushShutdown)
		}
		p.mu.Unlock()
		<-done
	}
	close(p.outcomes)
	<-finished
	stopBeats()
	<-beatsDone
	return nil
}

// loadQueues reads the push queues.
func (p *Pusher) loadQueues(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	qs, err := p.store.PushQueues(lctx)
	if err != nil {
		if ctx.Err() == nil {
			p.logger.Warn("reading push queues failed", "error", err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queues = make(map[string]domain.PushQueue, len(qs))
	for _, q := range qs {
		p.queues[q.Name] = q
		if q.HeldUntil != nil && q.HeldUntil.After(p.held[q.Name]) {
			p.held[q.Name] = *q.HeldUntil
		}
	}
}

// ready returns the queues to claim from now, and when the earliest hold
// ends (zero: none).
func (p *Pusher) ready(now time.Time) (names []string, nextHold time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, q := range p.queues {
		if q.Paused {
			continue
		}
		if h, ok := p.held[name]; ok && h.After(now) {
			if nextHold.IsZero() || h.Before(nextHold) {
				nextHold = h
			}
			continue
		}
		names = append(names, name)
	}
	return names, nextHold
}

// produce claims and starts deliveries until ctx is done.
func (p *Pusher) produce(ctx context.Context) {
	poll := time.NewTicker(p.cfg.PollInterval)
	defer poll.Stop()
	reloadEvery := time.NewTicker(5 * time.Second)
	defer reloadEvery.Stop()
	more := true
	for ctx.Err() == nil {
		names, nextHold := p.ready(time.Now())
		free := p.cfg.MaxInFlight - p.InFlight()
		if more && free > 0 && len(names) > 0 {
			limit := min(free, 100)
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseTTL)
			claimed, err := p.store.ClaimJobs(cctx, domain.ClaimParams{WorkerID: p.cfg.WorkerID, Queues: names, Push: true,
				Limit: limit, LeaseTTL: p.cfg.LeaseTTL})
			cancel()
			if err != nil {
				p.logger.WarnContext(ctx, "push claim failed; retrying", "error", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				continue
			}
			more = len(claimed) == limit
			for _, j := range claimed {
				p.start(j)
			}
			continue
		}
		var holdEnds <-chan time.Time
		if !nextHold.IsZero() {
			holdEnds = time.After(time.Until(nextHold))
		}
		select {
		case <-ctx.Done():
			return
		case <-p.notify:
			more = true
		case <-poll.C:
			more = true
		case <-holdEnds:
			more = true
		case <-p.freed:
		case <-p.reload:
			p.loadQueues(ctx)
			more = true
		case <-reloadEvery.C:
			p.loadQueues(ctx)
		}
	}
}

// start delivers j in a goroutine of its own.
func (p *Pusher) start(j *jobs.Job) {
	p.mu.Lock()
	q, ok := p.queues[j.Queue]
	dctx, cancel := context.WithCancelCause(context.Background())
	d := &delivery{job: j, lease: domain.LeaseOf(j), cancel: cancel}
	p.inFlight[j.ID] = d
	p.mu.Unlock()
	p.open.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cancel(nil)
		var out pushOutcome
		if !ok { // its push was removed between the claim and now
			out = pushOutcome{finish: &domain.Finish{Lease: d.lease, Outcome: domain.OutcomeInterrupted,
				Error: "interrupted: the queue stopped pushing before the job was sent"}}
		} else {
			out = p.tracedDeliver(dctx, q, d)
		}
		p.mu.Lock()
		delete(p.inFlight, j.ID)
		p.mu.Unlock()
		if !d.lost.Load() {
			p.outcomes <- out
		}
		p.open.Add(-1)
		signal(p.freed)
	}()
}
