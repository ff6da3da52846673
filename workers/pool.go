package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"flint/jobs"
	"flint/logs"
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

// Store is what the pool needs from storage; *db.Store implements it.
type Store interface {
	ClaimJobs(ctx context.Context, p jobs.ClaimParams) ([]*jobs.Job, error)
	ExtendLeases(ctx context.Context, beats []jobs.Heartbeat, ttl time.Duration) ([]jobs.LeaseStatus, error)
	InsertJobLogs(ctx context.Context, lines []jobs.LogEntry) error
	FinishJobs(ctx context.Context, batch []jobs.Finish) (finished, cascaded []jobs.Moved, err error)
}

// FastPath is a source of candidate ids to claim, such as the Redis ready
// queue. Candidates are hints: the claim by id re-checks every one.
type FastPath interface {
	Healthy() bool
	ReadyCandidates(ctx context.Context, n int) ([]uuid.UUID, error)
	ClaimJobsByID(ctx context.Context, p jobs.ClaimParams, ids []uuid.UUID) ([]*jobs.Job, error)
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
	// FetchLimit caps one claim; zero means Workers.
	FetchLimit int
	// ClaimAhead is how many claimed jobs may wait for a worker, so that
	// workers pick up their next job without waiting on a claim round
	// trip. Waiting jobs are leased and heartbeated like running ones and
	// handed back unstarted on shutdown. Zero means Workers; negative
	// means none (claim only for idle workers).
	ClaimAhead int
	// FinishBatch caps one batch of outcome writes; zero means 1000.
	FinishBatch int
	// FastPath, if set, supplies candidate job ids (the Redis ready queue)
	// that the pool claims by id before falling back to the ordinary claim.
	// Only used when the pool works every queue.
	FastPath FastPath
	// OnRun, if set, is called after each run with its outcome and how long
	// the handler took (for metrics).
	OnRun func(j *jobs.Job, outcome jobs.Outcome, d time.Duration)
	// OnMoved, if set, is called after outcomes are written with the jobs
	// they moved (lease-lost entries excluded), and the dependents released
	// or cancelled as a consequence.
	OnMoved func(moved []jobs.Moved)
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
	if c.FetchLimit <= 0 {
		c.FetchLimit = c.Workers
	}
	if c.ClaimAhead == 0 {
		c.ClaimAhead = c.Workers
	} else if c.ClaimAhead < 0 {
		c.ClaimAhead = 0
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

	work     chan *execution  // claimed jobs, to the worker goroutines (cap ClaimAhead)
	finishes chan jobs.Finish // outcomes, to the finisher
	notify   chan struct{}    // new work may exist (cap 1)
	freed    chan struct{}    // a worker became idle (cap 1)
	beatNow  chan struct{}    // heartbeat at once (cap 1)
	free     atomic.Int64     // idle workers plus free places in work: how many more jobs to claim
	draining atomic.Bool      // set once claiming has stopped: jobs not yet started go back
	running  sync.Map         // uuid.UUID → *execution, until its outcome is written
	queues   map[string]bool  // nil means all
	stopJobs context.CancelCauseFunc
	jobsCtx  context.Context
	started  atomic.Bool
	inFlight sync.WaitGroup // worker goroutines
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
}

// pausedQueues is implemented by stores that know which queues are paused
// (*db.Store): the pool ignores wake-ups for them.
type pausedQueues interface {
	QueuePaused(queue string) bool
}

// execution is one claimed job, from its claim (it may wait in work for a
// worker) until its outcome is written.
type execution struct {
	job      *jobs.Job
	lease    jobs.Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline atomic.Int64 // UnixNano once started with a timeout; zero: none
	lost     atomic.Bool
	started  atomic.Bool // the handler has been called
	// settled is set by whoever reports the outcome: the worker when the
	// handler returns, or the drain when it gives up on the handler. From
	// then on the execution stays in running, still heartbeated, until the
	// finisher has written the outcome, so a slow write cannot let the
	// lease lapse and the finished job run again.
	settled atomic.Bool
	// progress is the latest progress not yet written; logLines counts the
	// lines its handler logged (capped at jobs.MaxJobLogLines).
	progress atomic.Pointer[jobs.Progress]
	logLines atomic.Int64
	// logger is made when the handler first asks for it.
	loggerOnce sync.Once
	logger     *slog.Logger
}

// handlerContext is what an execution's handler reaches through its
// context: jobs.ReportProgress (the latest report waits for the next
// heartbeat, which the pool brings forward to within a second) and
// jobs.Logger (made when the handler first asks for it).
type handlerContext struct {
	p  *Pool
	ex *execution
}

func (h handlerContext) ReportProgress(percent int, message string) {
	h.ex.progress.Store(&jobs.Progress{Percent: percent, Message: message})
	h.p.progressDirty.Store(true)
}

func (h handlerContext) JobLogger() *slog.Logger {
	ex := h.ex
	ex.loggerOnce.Do(func() {
		ex.logger = slog.New(logs.Scrubbing(&jobLogHandler{w: h.p.jobLogs, ex: ex,
			next: h.p.logger.With("job_id", ex.job.ID, "type", ex.job.Type, "attempt", ex.job.Attempt).Handler()}))
	})
	return ex.logger
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
		finishes: make(chan jobs.Finish, cfg.Workers+cfg.ClaimAhead), // room for every claimed job
		notify:   make(chan struct{}, 1),
		freed:    make(chan struct{}, 1),
		beatNow:  make(chan struct{}, 1),
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
	if pq, ok := p.store.(pausedQueues); ok && queue != "" && pq.QueuePaused(queue) {
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

	p.produce(ctx)

	// Drain.
	p.draining.Store(true)
	close(p.work)
	for ex := range p.work {
		p.execute(ex) // not started: handed back at once, alongside the workers
	}
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
	p.stopJobs(ErrShutdown)
	p.jobLogs.close()
	<-logsDone
	p.logger.InfoContext(ctx, "worker pool stopped", "drain", time.Since(drainStart).Round(time.Millisecond))
	return nil
}

// produce claims jobs while there are idle workers and work is likely to
// exist, until ctx is done.
func (p *Pool) produce(ctx context.Context) {
	poll := time.NewTicker(p.cfg.PollInterval)
	defer poll.Stop()
	more := true // work may be waiting: start with a claim
	failures := 0
	var retry <-chan time.Time // a rate limit allows the next start
	for ctx.Err() == nil {
		if free := int(p.free.Load()); more && free > 0 {
			limit := min(free, p.cfg.FetchLimit)
			claimed, held, err := p.claim(ctx, limit)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				failures++
				wait := min(time.Duration(failures)*100*time.Millisecond, 5*time.Second)
				p.logger.WarnContext(ctx, "claim failed; retrying", "error", err, "retry_in", wait)
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
			failures = 0
			more = len(claimed) == limit
			p.flowWaiting.Store(held.Waiting)
			if held.RetryAfter > 0 {
				retry = time.After(max(held.RetryAfter, 5*time.Millisecond))
			}
			for _, j := range claimed {
				ex := &execution{job: j, lease: jobs.LeaseOf(j)}
				ex.ctx, ex.cancel = context.WithCancelCause(p.jobsCtx)
				p.running.Store(j.ID, ex) // heartbeated from now on
				p.free.Add(-1)
				p.work <- ex // never blocks: free counts its places
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-p.notify:
			more = true
		case <-poll.C:
			more = true
		case <-retry:
			more, retry = true, nil
		case <-p.freed:
			// An idle worker claims again only if the last claim came back
			// full; otherwise a notification or the poll says when.
		}
	}
}

// claim takes up to limit jobs: candidates from the fast path first, when
// there is one, then the ordinary claim for the rest. Shutdown does not
// cut a claim short: one cancelled after the database committed it would
// strand its jobs until their leases ran out and count them as crashed.
//
// held says what flow control held back: whether a limited queue still has
// jobs waiting, and when its rate limit next allows a start.
func (p *Pool) claim(ctx context.Context, limit int) (claimed []*jobs.Job, held jobs.FlowHold, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseTTL)
	defer cancel()
	params := jobs.ClaimParams{WorkerID: p.cfg.WorkerID, Queues: p.cfg.Queues, Limit: limit, LeaseTTL: p.cfg.LeaseTTL}
	if fp := p.cfg.FastPath; fp != nil && len(p.cfg.Queues) == 0 && fp.Healthy() {
		if ids, err := fp.ReadyCandidates(ctx, limit); err == nil && len(ids) > 0 {
			got, err := fp.ClaimJobsByID(ctx, params, ids)
			if err != nil {
				return nil, held, err
			}
			claimed = got
		}
	}
	if len(claimed) < limit {
		params.Limit = limit - len(claimed)
		params.Held = &held
		more, err := p.store.ClaimJobs(ctx, params)
		if err != nil {
			if len(claimed) > 0 {
				return claimed, held, nil
			}
			return nil, held, err
		}
		claimed = append(claimed, more...)
	}
	return claimed, held, nil
}

// worker runs claimed jobs until the work channel closes.
func (p *Pool) worker() {
	defer p.inFlight.Done()
	for ex := range p.work {
		p.execute(ex)
		p.free.Add(1)
		signal(p.freed)
	}
}

// execute runs one claimed job and queues its outcome. A job whose lease
// was lost while it waited is dropped; one whose cancellation was requested
// meanwhile is cancelled, and on shutdown one not yet started goes back to
// the queue, all without running it.
func (p *Pool) execute(ex *execution) {
	j, ctx := ex.job, ex.ctx
	defer ex.cancel(nil)
	if ex.lost.Load() {
		p.running.CompareAndDelete(j.ID, ex)
		return // the heartbeat has said so
	}
	if p.draining.Load() || context.Cause(ctx) != nil {
		f := jobs.Finish{Lease: ex.lease, Outcome: jobs.OutcomeInterrupted,
			Error: "interrupted: worker " + p.cfg.WorkerID + " shut down before the job started"}
		if errors.Is(context.Cause(ctx), ErrCancelRequested) {
			f.Outcome, f.Error = jobs.OutcomeCancelled, "cancelled before it started"
		}
		p.settle(ex, f)
		return
	}
	if t := j.Timeout(); t > 0 {
		deadline := time.Now().Add(t)
		ex.deadline.Store(deadline.UnixNano())
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, deadline, ErrTimeout)
		defer stop()
	}
	hc := handlerContext{p, ex}
	ctx = jobs.WithLogger(jobs.WithProgress(ctx, hc), hc)
	ex.started.Store(true)
	start := time.Now()
	result, err := p.runHandler(ctx, j)

	if ex.lost.Load() {
		p.running.CompareAndDelete(j.ID, ex)
		p.logger.Warn("lease lost while running; outcome discarded", "job_id", j.ID, "type", j.Type,
			"duration_ms", time.Since(start).Milliseconds())
		return
	}
	f := jobs.Finish{Lease: ex.lease}
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		f.Outcome = jobs.OutcomeSucceeded
		if result != nil {
			b, merr := marshalResult(result)
			if merr != nil {
				f.Outcome, f.Error, f.RetryDelay = jobs.OutcomeFailed, merr.Error(), jobs.Backoff(j.Attempt, nil)
			}
			f.Result = b
		}
	case jobs.IsCancel(err):
		f.Outcome, f.Error = jobs.OutcomeCancelled, err.Error()
	case errors.Is(cause, ErrCancelRequested):
		f.Outcome, f.Error = jobs.OutcomeCancelled, "cancelled while running: "+err.Error()
	case errors.Is(cause, ErrShutdown):
		f.Outcome, f.Error = jobs.OutcomeInterrupted, "interrupted: worker "+p.cfg.WorkerID+" shut down before the job finished"
	case jobs.IsPermanent(err):
		f.Outcome, f.Error, f.Final = jobs.OutcomeFailed, err.Error(), true
	case errors.Is(cause, ErrTimeout):
		f.Outcome, f.Error = jobs.OutcomeFailed, fmt.Sprintf("timed out after %ds: %v", j.TimeoutSeconds, err)
		f.RetryDelay = jobs.Backoff(j.Attempt, nil)
	default:
		f.Outcome, f.Error = jobs.OutcomeFailed, err.Error()
		f.RetryDelay = jobs.Backoff(j.Attempt, nil)
	}
	if p.cfg.OnRun != nil {
		p.cfg.OnRun(j, f.Outcome, time.Since(start))
	}
	if f.Outcome != jobs.OutcomeSucceeded {
		p.logger.Info("job attempt ended", "job_id", j.ID, "type", j.Type, "queue", j.Queue, "attempt", j.Attempt,
			"outcome", f.Outcome, "error", f.Error, "duration_ms", time.Since(start).Milliseconds())
	}
	p.settle(ex, f)
}

// settle queues ex's outcome unless it has already been reported (the
// drain gave up on the handler) or the pool has stopped taking outcomes.
func (p *Pool) settle(ex *execution, f jobs.Finish) {
	p.finMu.RLock()
	defer p.finMu.RUnlock()
	if !ex.settled.CompareAndSwap(false, true) {
		return // the drain reported it; the finisher forgets it
	}
	if p.finClosed { // cannot happen: the drain settles all before closing
		p.running.CompareAndDelete(ex.job.ID, ex)
		return
	}
	p.finishes <- f
}

// written forgets the executions whose outcomes the finisher has dealt
// with, so heartbeats stop renewing their leases.
func (p *Pool) written(batch []jobs.Finish) {
	for _, f := range batch {
		if v, ok := p.running.Load(f.Lease.JobID); ok && v.(*execution).lease == f.Lease {
			p.running.CompareAndDelete(f.Lease.JobID, v)
		}
	}
}

// runHandler calls the job's handler, turning a panic into an error that
// carries the stack.
func (p *Pool) runHandler(ctx context.Context, j *jobs.Job) (result any, err error) {
	h, ok := p.registry.Lookup(j.Type)
	if !ok {
		return nil, fmt.Errorf("no handler for job type %q in worker %s", j.Type, p.cfg.WorkerID)
	}
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("panic: %v\n\n%s", r, debug.Stack())
		}
	}()
	return h.Work(ctx, j)
}

// marshalResult encodes a handler result, refusing what the jobs table
// cannot hold.
func marshalResult(v any) ([]byte, error) {
	var b []byte
	switch r := v.(type) {
	case json.RawMessage:
		if !json.Valid(r) {
			return nil, errors.New("handler returned a result that is not valid JSON")
		}
		b = r
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("handler result cannot be encoded as JSON: %v", err)
		}
	}
	if len(b) > jobs.MaxResultBytes {
		return nil, fmt.Errorf("handler result is %d bytes; the limit is %d", len(b), jobs.MaxResultBytes)
	}
	if string(b) == "null" {
		return nil, nil
	}
	if containsNULEscape(b) {
		return nil, errors.New("handler result contains a NUL character (\\u0000), which cannot be stored")
	}
	return b, nil
}

func containsNULEscape(b []byte) bool {
	for i := 0; i+6 <= len(b); i++ {
		if b[i] == '\\' {
			if string(b[i:i+6]) == `\u0000` {
				return true
			}
			i++ // skip the escaped character
		}
	}
	return false
}

// heartbeats renews the leases of running jobs until ctx is done, and
// brings the next heartbeat forward when a handler reported progress, at
// most once a second.
func (p *Pool) heartbeats(ctx context.Context) {
	t := time.NewTicker(p.cfg.HeartbeatInterval)
	defer t.Stop()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.beatNow:
		case <-progress.C:
			if !p.progressDirty.Swap(false) {
				continue
			}
		}
		p.beat(ctx)
	}
}

// beat extends every live lease in one statement and acts on what it
// learns: cancel requests cancel the handler, lost leases stop it.
func (p *Pool) beat(ctx context.Context) {
	now := time.Now()
	var beats []jobs.Heartbeat
	byID := map[uuid.UUID]*execution{}
	p.running.Range(func(_, v any) bool {
		ex := v.(*execution)
		if d := ex.deadline.Load(); !ex.settled.Load() && d != 0 && now.After(time.Unix(0, d).Add(p.cfg.TimeoutGrace)) {
			// The handler ignores its context: stop vouching for it.
			return true
		}
		beats = append(beats, jobs.Heartbeat{Lease: ex.lease, Progress: ex.progress.Swap(nil)})
		byID[ex.lease.JobID] = ex
		return true
	})
	if len(beats) == 0 {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, p.cfg.HeartbeatInterval)
	defer cancel()
	p.leaseWrites.Lock()
	statuses, err := p.store.ExtendLeases(bctx, beats, p.cfg.LeaseTTL)
	p.leaseWrites.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			p.logger.WarnContext(ctx, "heartbeat failed", "error", err, "jobs", len(beats))
		}
		for _, b := range beats { // carried by the next heartbeat, unless newer
			if b.Progress != nil {
				byID[b.JobID].progress.CompareAndSwap(nil, b.Progress)
			}
		}
		return
	}
	for _, st := range statuses {
		ex := byID[st.JobID]
		delete(byID, st.JobID)
		if st.CancelRequested && ex != nil {
			ex.cancel(ErrCancelRequested)
		}
	}
	for id, ex := range byID {
		// Still registered under the same lease but not extended: lost.
		if cur, ok := p.running.Load(id); ok && cur == ex {
			ex.lost.Store(true)
			ex.cancel(jobs.ErrLeaseLost)
			p.logger.WarnContext(ctx, "lease lost; stopping job", "job_id", id, "type", ex.job.Type)
		}
	}
}

// abandonRunning hands back jobs whose handlers did not return after being
// cancelled at the end of the drain. A handler that returns meanwhile
// reports its own outcome; settled decides which of the two does.
func (p *Pool) abandonRunning() {
	p.running.Range(func(k, v any) bool {
		ex := v.(*execution)
		if !ex.settled.CompareAndSwap(false, true) {
			return true // its outcome is already on its way
		}
		p.logger.Warn("handler ignored cancellation; handing its job back", "job_id", ex.job.ID, "type", ex.job.Type)
		p.finishes <- jobs.Finish{Lease: ex.lease, Outcome: jobs.OutcomeInterrupted,
			Error: "interrupted: worker " + p.cfg.WorkerID + " shut down and the handler did not stop"}
		return true
	})
}

// finisher writes outcomes in batches: it takes what is waiting (up to
// FinishBatch) and writes it in one statement, so the batch grows with load
// and latency stays low when idle.
func (p *Pool) finisher() {
	batch := make([]jobs.Finish, 0, p.cfg.FinishBatch)
	for f := range p.finishes {
		batch = append(batch[:0], f)
	fill:
		for len(batch) < p.cfg.FinishBatch {
			select {
			case f, ok := <-p.finishes:
				if !ok {
					break fill
				}
				batch = append(batch, f)
			default:
				break fill
			}
		}
		p.flush(batch)
	}
}

// flush writes one batch. While the database is unreachable it retries
// (the lease guard makes a late write harmless, and the full outcome channel
// holds back claiming meanwhile). If the database refuses the batch's data,
// it writes the rows one at a time so one bad row cannot sink the others.
func (p *Pool) flush(batch []jobs.Finish) {
	defer p.written(batch)
	ctx := context.Background()
	var moved, cascaded []jobs.Moved
	var err error
	for attempt := 1; ; attempt++ {
		p.leaseWrites.Lock()
		moved, cascaded, err = p.store.FinishJobs(ctx, batch)
		p.leaseWrites.Unlock()
		if err == nil {
			break
		}
		if isDataError(err) {
			if len(batch) > 1 {
				p.logger.Warn("outcome batch refused; writing one by one", "error", err, "jobs", len(batch))
				for _, f := range batch {
					p.flush([]jobs.Finish{f})
				}
			} else {
				p.logger.Error("outcome refused by the database; the reaper will return the job",
					"error", err, "job_id", batch[0].JobID)
			}
			return
		}
		if attempt >= 60 {
			p.logger.Error("giving up writing job outcomes; the reaper will return the jobs",
				"error", err, "jobs", len(batch))
			return
		}
		time.Sleep(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second))
	}
	if p.flowWaiting.Load() {
		signal(p.notify) // slots of a limited queue opened: claim again
	}
	report := moved[:0:0]
	for _, m := range moved {
		if m.LeaseLost() {
			p.logger.Warn("outcome refused: lease lost (the job was reaped or re-claimed)", "job_id", m.JobID)
			continue
		}
		report = append(report, m)
	}
	report = append(report, cascaded...)
	if p.cfg.OnMoved != nil && len(report) > 0 {
		p.cfg.OnMoved(report)
	}
}

// isDataError reports whether err is PostgreSQL refusing the data (SQLSTATE
// classes 22 and 23) rather than a connection problem.
func isDataError(err error) bool {
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		c := st.SQLState()
		return len(c) == 5 && (c[:2] == "22" || c[:2] == "23")
	}
	return false
}
