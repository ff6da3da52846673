package workers

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Causes with which the pool cancels a handler's context. Handlers see them
// through context.Cause.
var (
	// ErrCancelRequested: an operator cancelled the running job.
	ErrCancelRequested = errors.New("cancellation requested")
	// ErrShutdown: the worker is draining and its drain timeout ran out.
	ErrShutdown = errors.New("worker shutting down")
	// ErrTimeout: the job ran past its timeout_seconds.
	ErrTimeout = errors.New("job timed out")
)

// maxDefaultClaimAhead bounds the default claim-ahead buffer of large
// pools: 8,000 claimed jobs is what a 1,000-worker pool had before the
// default grew from 8 to 32 times Workers for the small pools, whose
// claims it had held to a few hundred jobs.
const maxDefaultClaimAhead = 8000

// Store is what the pool needs from storage; *db.Store implements it.
type Store interface {
	// ClaimJobs takes up to p.Limit due jobs, leased to p.WorkerID.
	ClaimJobs(ctx context.Context, p domain.ClaimParams) ([]*jobs.Job, error)
	// ExtendLeases renews the leases still held, by ttl, and stores the
	// progress the beats carry; a lease missing from the answer is lost.
	ExtendLeases(ctx context.Context, beats []domain.Heartbeat, ttl time.Duration) ([]domain.LeaseStatus, error)
	// InsertJobLogs stores lines handlers logged through jobs.Logger.
	InsertJobLogs(ctx context.Context, lines []domain.LogEntry) error
	// StartJobs records that the handlers of buffered claims started: the
	// jobs move from claimed to running.
	StartJobs(ctx context.Context, starts []domain.Start) error
	// ReleaseJobs hands claimed jobs that never started back to the queue
	// as if never claimed, and returns the leases it released.
	ReleaseJobs(ctx context.Context, leases []domain.Lease) ([]domain.Lease, error)
	// KeepLeases returns those of leases that still hold their jobs, and
	// makes sure a hand-back of them whose answer was lost, if it is still
	// on its way, releases none of them.
	KeepLeases(ctx context.Context, leases []domain.Lease) ([]domain.Lease, error)
	// FinishJobs records the outcomes of a batch of attempts, each guarded
	// by its lease, and returns the jobs it moved and the dependents it
	// released or cancelled as a consequence.
	FinishJobs(ctx context.Context, batch []domain.Finish) (finished, cascaded []domain.Moved, err error)
	// CommitStep records a step the handler numbered, of the attempt whose
	// lease is l (see jobs.Step), with the attempt's start when start is
	// not nil: the step as stored, and whether this call wrote it.
	CommitStep(ctx context.Context, l domain.Lease, step jobs.StepRecord, start *time.Time) (jobs.StepRecord, bool, error)
}

// FastPath is a source of candidate ids to claim, such as the Redis ready
// queue. Candidates are hints: the claim by id re-checks every one.
type FastPath interface {
	// Healthy reports whether the fast path may be asked now.
	Healthy() bool
	// ReadyCandidates returns up to n ids of jobs that are likely queued.
	ReadyCandidates(ctx context.Context, n int) ([]uuid.UUID, error)
	// ClaimJobsByID claims those of ids that are still claimable, with the
	// same guards as Store.ClaimJobs.
	ClaimJobsByID(ctx context.Context, p domain.ClaimParams, ids []uuid.UUID) ([]*jobs.Job, error)
}

// Config configures a Pool. Zero values mean the defaults given.
type Config struct {
	// WorkerID names this process in leases and executions. Required.
	WorkerID string
	// Workers is the number of jobs run at once; zero means 25 per CPU.
	Workers int
	// Queues limits the pool to these queues; empty means every queue.
	Queues []string
	// LeaseTTL is the lease a claim takes and a heartbeat renews; zero
	// means 30 s.
	LeaseTTL time.Duration
	// HeartbeatInterval is how often leases are renewed; zero means 5 s.
	HeartbeatInterval time.Duration
	// PollInterval is how often the pool looks for work when no
	// notification woke it; zero means 1 s.
	PollInterval time.Duration
	// DrainTimeout is how long running jobs may finish on shutdown before
	// they are cancelled and handed back; zero means 30 s.
	DrainTimeout time.Duration
	// TimeoutGrace is how long past its timeout a handler that ignores its
	// context keeps its lease; zero means 10 s.
	TimeoutGrace time.Duration
	// FetchLimit caps one claim; zero means Workers + ClaimAhead, so that
	// one claim can fill every idle worker and the buffer.
	FetchLimit int
	// ClaimAhead caps how many claimed jobs may wait for a worker, so that
	// workers pick up their next job without waiting on a claim round
	// trip. The pool claims ahead only as many jobs as its workers are
	// expected to finish during one claim round trip (from the recent
	// handler and claim times), so short jobs keep every worker busy and
	// long ones are never claimed before a worker can start them. Waiting
	// jobs are leased and heartbeated like running ones and handed back
	// unstarted on shutdown. Zero means 32 times Workers, at most
	// maxDefaultClaimAhead (only jobs much shorter than a claim's round
	// trip reach it; see ARCHITECTURE, "Claimed is not running"); negative means none
	// (claim only for idle workers).
	ClaimAhead int
	// FinishBatch caps one batch of outcome writes; zero means 1000.
	FinishBatch int
	// FastPath, if set, supplies candidate job ids (the Redis ready queue)
	// that the pool claims by id before falling back to the ordinary claim.
	// Only used when the pool works every queue.
	FastPath FastPath
	// OnRun, if set, is called after each run with its outcome and how long
	// the handler took (for metrics).
	OnRun func(j *jobs.Job, outcome domain.Outcome, d time.Duration)
	// Types says which job types the jobs a handler spawns may name (see
	// jobs.Spawn); nil means the pool's registry.
	Types jobs.TypeSource
	// OnMoved, if set, is called after outcomes are written with the jobs
	// they moved (lease-lost entries excluded), and the dependents released
	// or cancelled as a consequence.
	OnMoved func(moved []domain.Moved)
}

func (c *Config) fill() {
	if c.Workers <= 0 {
		c.Workers = 25 * runtime.GOMAXPROCS(0)
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.TimeoutGrace <= 0 {
		c.TimeoutGrace = 10 * time.Second
	}
	if c.ClaimAhead == 0 {
		c.ClaimAhead = min(32*c.Workers, maxDefaultClaimAhead)
	} else if c.ClaimAhead < 0 {
		c.ClaimAhead = 0
	}
	if c.FetchLimit <= 0 {
		c.FetchLimit = c.Workers + c.ClaimAhead
	}
	if c.FinishBatch <= 0 {
		c.FinishBatch = 1000
	}
}

// Pool runs jobs from the store with a fixed number of worker goroutines.
type Pool struct {
	cfg      Config
	store    Store
	registry *jobs.Registry
	logger   *slog.Logger

	// leaseWrites makes the heartbeat and the outcome writes take turns.
	// Both update many of this pool's rows in one statement, each in an
	// order of its own; side by side, each could hold a row the other
	// waits for, and PostgreSQL broke the cycle by failing one of them a
	// second later (deadlock_timeout), several times in a drain. Taking
	// turns costs a write at most one heartbeat's wait.
	leaseWrites sync.Mutex

	work     chan *execution    // claimed jobs, to the worker goroutines (cap ClaimAhead)
	finishes chan domain.Finish // outcomes, to the finisher
	notify   chan struct{}      // new work may exist (cap 1)
	freed    chan struct{}      // a worker became idle (cap 1)
	beatNow  chan struct{}      // heartbeat at once (cap 1)
	startNow chan struct{}      // a handler started (cap 1): see starter
	free     atomic.Int64       // idle workers plus free places in work: how many more jobs to claim
	draining atomic.Bool        // set once claiming has stopped: jobs not yet started go back
	drained  chan struct{}      // closed when draining is set
	// heldMu guards held (jobs claimed ahead of their run_at, on their
	// timers: see holdUntilRunAt), heldClosed (the drain took them) and
	// unsent (releases the drain interrupted); releasing counts releases
	// on their way to work.
	heldMu     sync.Mutex
	held       map[*execution]*time.Timer
	heldClosed bool
	unsent     []*execution
	releasing  sync.WaitGroup
	running    sync.Map        // uuid.UUID → *execution, until its outcome is written
	queues     map[string]bool // nil means all
	stopJobs   context.CancelCauseFunc
	jobsCtx    context.Context
	started    atomic.Bool
	inFlight   sync.WaitGroup // worker goroutines
	// finMu guards sending on finishes against its closing: senders hold
	// it for reading, Run closes the channel holding it for writing.
	finMu     sync.RWMutex
	finClosed bool
	// jobLogs stores what handlers log through jobs.Logger; progressDirty
	// says a handler reported progress that the next heartbeat carries.
	jobLogs       *jobLogWriter
	progressDirty atomic.Bool
	// flowWaiting says the last claim left jobs waiting in a limited
	// queue: each batch of outcomes written (slots opened) claims again.
	flowWaiting atomic.Bool
	// epoch is when the pool was made and lastFreed when a worker last
	// became idle, as time since epoch (monotonic): see rebalance.
	epoch     time.Time
	lastFreed atomic.Int64
	// runAvg and claimAvg are moving averages (ns) of a handler's run and
	// of a claim's round trip; they size the claim-ahead (aheadNow).
	runAvg, claimAvg atomic.Int64
}

// NewPool returns a pool; call Run to start it.
func NewPool(cfg Config, store Store, registry *jobs.Registry, logger *slog.Logger) *Pool {
	cfg.fill()
	p := &Pool{
		cfg:      cfg,
		store:    store,
		registry: registry,
		logger:   logger.With("component", "worker_pool", "worker_id", cfg.WorkerID),
		work:     make(chan *execution, cfg.ClaimAhead),
		finishes: make(chan domain.Finish, cfg.Workers+cfg.ClaimAhead), // room for every claimed job
		notify:   make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		beatNow:  make(chan struct{}, 1),
		startNow: make(chan struct{}, 1),
		drained:  make(chan struct{}),
		held:     map[*execution]*time.Timer{},
		epoch:    time.Now(),
		jobLogs:  newJobLogWriter(store, logger.With("component", "job_logs", "worker_id", cfg.WorkerID)),
	}
	if len(cfg.Queues) > 0 {
		p.queues = map[string]bool{}
		for _, q := range cfg.Queues {
			p.queues[q] = true
		}
	}
	p.jobsCtx, p.stopJobs = context.WithCancelCause(context.Background())
	return p
}

// Config returns the pool's configuration with defaults filled in.
func (p *Pool) Config() Config { return p.cfg }

// Wake tells the pool that jobs became queued in queue ("" for unknown), so
// it claims now instead of at the next poll.
func (p *Pool) Wake(queue string) {
	if queue != "" && p.queues != nil && !p.queues[queue] {
		return
	}
	if queue != "" && p.queuePaused(queue) {
		return // enqueues into a paused queue must not make every pool claim
	}
	signal(p.notify)
}

// CancelRequested tells the pool that cancellation of a job was requested;
// if the job runs here, the pool heartbeats at once to learn and act on it.
func (p *Pool) CancelRequested(jobID string) {
	id, err := uuid.Parse(jobID)
	if err != nil {
		return
	}
	if _, ok := p.running.Load(id); ok {
		signal(p.beatNow)
	}
}

// Running returns how many jobs run right now (outcomes waiting to be
// written not included).
func (p *Pool) Running() int {
	n := 0
	p.running.Range(func(_, v any) bool {
		if ex := v.(*execution); ex.started.Load() && !ex.settled.Load() {
			n++
		}
		return true
	})
	return n
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run claims and runs jobs until ctx is done, then drains: it stops
// claiming, waits up to DrainTimeout for running jobs, cancels the rest and
// hands them back to the queue uncharged, writes every outcome, and returns.
func (p *Pool) Run(ctx context.Context) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("worker pool: Run called twice")
	}
	p.logger.InfoContext(ctx, "worker pool started", "workers", p.cfg.Workers, "queues", p.cfg.Queues)

	finisherDone := make(chan struct{})
	go func() {
		defer close(finisherDone)
		p.finisher()
	}()
	p.free.Store(int64(p.cfg.Workers + p.cfg.ClaimAhead))
	for range p.cfg.Workers {
		p.inFlight.Add(1)
		go p.worker()
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		p.jobLogs.run()
	}()
	beatCtx, stopBeats := context.WithCancel(context.WithoutCancel(ctx))
	beatsDone := make(chan struct{})
	go func() {
		defer close(beatsDone)
		p.heartbeats(beatCtx)
	}()
	startsDone := goDone(func() { p.starter(beatCtx) })
	rebalanceCtx, stopRebalance := context.WithCancel(ctx)
	defer stopRebalance()
	rebalanceDone := goDone(func() { p.rebalancer(rebalanceCtx) })

	p.produce(ctx)
	stopRebalance()
	<-rebalanceDone

	// Drain.
	p.handBackUnstarted()
	drainStart := time.Now()
	p.logger.InfoContext(ctx, "worker pool draining", "running", p.Running(), "drain_timeout", p.cfg.DrainTimeout)
	workersDone := make(chan struct{})
	go func() {
		p.inFlight.Wait()
		close(workersDone)
	}()
	select {
	case <-workersDone:
	case <-time.After(p.cfg.DrainTimeout):
		p.logger.WarnContext(ctx, "drain timeout reached; cancelling running jobs", "running", p.Running())
		p.stopJobs(ErrShutdown)
		select {
		case <-workersDone:
		case <-time.After(p.cfg.TimeoutGrace):
			// Handlers that ignore their context: hand their jobs back
			// ourselves. If one returns later, its write is fenced off.
			p.abandonRunning()
		}
	}
	p.finMu.Lock()
	p.finClosed = true
	close(p.finishes)
	p.finMu.Unlock()
	<-finisherDone
	stopBeats()
	<-beatsDone
	<-startsDone
	p.stopJobs(ErrShutdown)
	p.jobLogs.close()
	<-logsDone
	p.logger.InfoContext(ctx, "worker pool stopped", "drain", time.Since(drainStart).Round(time.Millisecond))
	return nil
}

// goDone runs f in a goroutine and returns a channel closed when it
// returns.
func goDone(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}
