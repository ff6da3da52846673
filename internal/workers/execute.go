package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// execution is one claimed job, from its claim (it may wait in work for a
// worker) until its outcome is written.
type execution struct {
	job      *jobs.Job
	lease    domain.Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	deadline atomic.Int64 // UnixNano once started with a timeout; zero: none
	lost     atomic.Bool
	started  atomic.Bool // the handler has been called
	// claimedAt is the claim's time on the database's clock and
	// claimedLocal when the claim came back, on this process's monotonic
	// clock: the start is claimedAt plus the time since claimedLocal, so
	// it needs no clock agreement between the process and the database.
	claimedAt    time.Time
	claimedLocal time.Time
	// ready is when it was handed to the workers, as time since the
	// pool's epoch: at its claim, or at its run_at when the pool held it
	// until then (holdUntilRunAt); zero while held.
	ready atomic.Int64
	// startAt is when the handler started (database clock), once it has;
	// startWritten says the starter has taken it to write (see starter).
	startAt      atomic.Pointer[time.Time]
	startWritten atomic.Bool
	// relMu guards taken (a worker has taken the job to run or hand back)
	// and released (the rebalancer handed it back unstarted while every
	// worker stayed busy: see rebalance). The rebalancer holds it while its
	// write is on its way, so a worker waits for the answer.
	relMu    sync.Mutex
	taken    bool
	released bool
	// settled is set by whoever reports the outcome: the worker when the
	// handler returns, or the drain when it gives up on the handler. From
	// then on the execution stays in running, still heartbeated, until the
	// finisher has written the outcome, so a slow write cannot let the
	// lease lapse and the finished job run again.
	settled atomic.Bool
	// progress is the latest progress not yet written; logLines counts the
	// lines its handler logged (capped at domain.MaxJobLogLines).
	progress atomic.Pointer[domain.Progress]
	logLines atomic.Int64
	// logMu guards held, passed, holdStop, lastLog and loggedThrough: the
	// lines of a short first attempt are held to be written with its
	// outcome (see holdsLog); lastLog is the time of the latest line,
	// which the run's end is never before; loggedThrough is the number
	// of the last line the log writer took from it, which its outcome
	// waits for (Pool.awaitLogs).
	logMu         sync.Mutex
	held          []domain.LogEntry
	passed        bool
	holdStop      func() bool
	lastLog       time.Time
	loggedThrough uint64
	// ended is when the handler returned, as markStarted's start.
	ended time.Time
	// logger is made when the handler first asks for it.
	loggerOnce sync.Once
	logger     *slog.Logger
	// spawnMu guards spawned: what the handler added to its workflow.
	spawnMu sync.Mutex
	spawned []jobs.Spawned
}

// take takes the claimed job for a worker, unless the rebalancer handed
// it back first.
func (ex *execution) take() bool {
	ex.relMu.Lock()
	defer ex.relMu.Unlock()
	ex.taken = true
	return !ex.released
}

// markStarted records that ex's handler starts now, on the database's
// clock (see execution.claimedAt), and wakes the starter.
func (p *Pool) markStarted(ex *execution) time.Time {
	// Never before run_at: a job held until then (holdUntilRunAt) starts
	// at it by the earlier clock, and this reckoning runs behind.
	at := later(ex.claimedAt.Add(time.Since(ex.claimedLocal)), ex.job.RunAt)
	ex.startAt.Store(&at)
	ex.started.Store(true)
	signal(p.startNow)
	return at
}

// endedAt is when the handler returned, for its outcome
// (domain.Finish.EndedAt): after the last line it logged, whose time is this
// process's, so that the run's end follows its lines in the job's log.
func (ex *execution) endedAt() *time.Time {
	ex.logMu.Lock()
	defer ex.logMu.Unlock()
	end := ex.ended
	if !ex.lastLog.Before(end) {
		end = ex.lastLog.Add(time.Microsecond) // after it as stored (µs)
	}
	return &end
}

// handlerContext is what an execution's handler reaches through its
// context: jobs.ReportProgress (the latest report waits for the next
// heartbeat, which the pool brings forward to within a second),
// jobs.Logger (made when the handler first asks for it) and jobs.Spawn
// (kept until the handler returns; written with its completion).
type handlerContext struct {
	p  *Pool
	ex *execution
}

func (h handlerContext) ReportProgress(percent int, message string) {
	h.ex.progress.Store(&domain.Progress{Percent: percent, Message: message})
	h.p.progressDirty.Store(true)
}

func (h handlerContext) JobLogger() *slog.Logger {
	ex := h.ex
	ex.loggerOnce.Do(func() {
		ex.logger = slog.New(logs.Scrubbing(&jobLogHandler{w: h.p.jobLogs, ex: ex,
			next: &lazyAttrs{base: h.p.logger.Handler(), attrs: []slog.Attr{
				slog.Any("job_id", ex.job.ID), slog.String("type", ex.job.Type), slog.Int("attempt", ex.job.Attempt)}}}))
	})
	return ex.logger
}

// RecordStep records a step of the running attempt, fenced by its lease.
// The attempt's start, when the starter has not taken it yet, goes with
// the step: one write of the jobs row instead of two that would lock it in
// turn. A lost lease also cancels the handler, as the heartbeat would.
func (h handlerContext) RecordStep(ctx context.Context, step jobs.StepRecord) (jobs.StepRecord, error) {
	var start *time.Time
	if at := h.ex.startAt.Load(); at != nil && h.ex.startWritten.CompareAndSwap(false, true) {
		start = at
	}
	rec, _, err := h.p.store.CommitStep(ctx, h.ex.lease, step, start)
	if errors.Is(err, domain.ErrLeaseLost) {
		h.ex.lost.Store(true)
		h.ex.cancel(domain.ErrLeaseLost)
	} else if err != nil && start != nil {
		h.ex.startWritten.Store(false) // the starter or the outcome writes it
	}
	return rec, err
}

// worker runs claimed jobs until the work channel closes.
func (p *Pool) worker() {
	defer p.inFlight.Done()
	for ex := range p.work {
		p.execute(ex)
		p.lastFreed.Store(int64(time.Since(p.epoch)))
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
	if !ex.take() {
		return // handed back unstarted by the rebalancer
	}
	defer ex.cancel(nil)
	if ex.lost.Load() {
		p.running.CompareAndDelete(j.ID, ex)
		return // the heartbeat has said so
	}
	if p.draining.Load() || context.Cause(ctx) != nil {
		f := domain.Finish{Lease: ex.lease, Outcome: domain.OutcomeInterrupted,
			Error: "interrupted: worker " + p.cfg.WorkerID + " shut down before the job started"}
		if errors.Is(context.Cause(ctx), ErrCancelRequested) {
			f.Outcome, f.Error = domain.OutcomeCancelled, "cancelled before it started"
		}
		p.settle(ex, f)
		return
	}
	if p.queuePaused(j.Queue) && p.handBack(ex) {
		return // claimed before its queue was paused: it goes back unstarted
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
	ctx = jobs.WithSpawn(jobs.ContextWithJob(ctx, j), hc)
	ctx = jobs.WithSteps(ctx, j, hc)
	var span trace.Span
	if tracing.Enabled() {
		ctx, span = startRunSpan(ctx, j, p.cfg.WorkerID)
	}
	at := p.markStarted(ex)
	p.logger.Debug("job attempt started", "job_id", j.ID, "type", j.Type, "queue", j.Queue, "attempt", j.Attempt)
	start := time.Now()
	result, err := p.runHandler(ctx, j)
	ex.ended = ex.claimedAt.Add(time.Since(ex.claimedLocal)) // on the database's clock, as the start
	if ex.lost.Load() {
		if span != nil {
			endLostSpan(span)
		}
		p.running.CompareAndDelete(j.ID, ex)
		p.logger.Warn("lease lost while running; outcome discarded", "job_id", j.ID, "type", j.Type,
			"duration_ms", time.Since(start).Milliseconds())
		return
	}
	f := p.outcome(ex, context.Cause(ctx), result, err)
	f.StartedAt = &at
	ex.takeSpawned(&f)
	if f.Outcome == domain.OutcomeSuspended { // stored by the log writer: a suspension writes none
		ex.passLog(p.jobLogs)
	}
	f.Log = ex.takeLog()
	f.EndedAt = ex.endedAt()
	if span != nil {
		endRunSpan(span, &f)
	}
	ran := time.Since(start)
	movingAverage(&p.runAvg, ran)
	if p.cfg.OnRun != nil {
		p.cfg.OnRun(j, f.Outcome, ran)
	}
	if f.Outcome != domain.OutcomeSucceeded && f.Outcome != domain.OutcomeFailed { // failures: when written (LogFailures)
		p.logger.Info("job attempt ended", "job_id", j.ID, "type", j.Type, "queue", j.Queue, "attempt", j.Attempt,
			"outcome", f.Outcome, "error", f.Error, "duration_ms", time.Since(start).Milliseconds())
	}
	p.settle(ex, f)
}

// outcome is how the attempt of ex ended, from what its handler returned
// and why its context ended (cause).
func (p *Pool) outcome(ex *execution, cause error, result any, err error) domain.Finish {
	j := ex.job
	f := domain.Finish{Lease: ex.lease}
	switch {
	case err == nil:
		f.Outcome = domain.OutcomeSucceeded
		if result != nil {
			b, merr := marshalResult(result)
			if merr != nil {
				f.Outcome, f.Error, f.RetryDelay = domain.OutcomeFailed, merr.Error(), domain.Backoff(j.Attempt, nil)
			}
			f.Result = b
		}
	case jobs.IsCancel(err):
		f.Outcome, f.Error = domain.OutcomeCancelled, err.Error()
	case errors.Is(cause, ErrCancelRequested):
		f.Outcome, f.Error = domain.OutcomeCancelled, "cancelled while running: "+err.Error()
	case errors.Is(cause, ErrShutdown):
		f.Outcome, f.Error = domain.OutcomeInterrupted, "interrupted: worker "+p.cfg.WorkerID+" shut down before the job finished"
	case isSuspend(err):
		s, _ := domain.AsSuspend(err)
		f.Outcome, f.Wait, f.Step = domain.OutcomeSuspended, &s.Wait, s.Step
	case jobs.IsPermanent(err):
		f.Outcome, f.Error, f.Final = domain.OutcomeFailed, err.Error(), true
	case errors.Is(cause, ErrTimeout):
		f.Outcome, f.Error = domain.OutcomeFailed, fmt.Sprintf("timed out after %ds: %v", j.TimeoutSeconds, err)
		f.RetryDelay = domain.Backoff(j.Attempt, nil)
	default:
		f.Outcome, f.Error = domain.OutcomeFailed, err.Error()
		f.RetryDelay = domain.Backoff(j.Attempt, nil)
	}
	return f
}

// settle queues ex's outcome unless it has already been reported (the
// drain gave up on the handler) or the pool has stopped taking outcomes.
func (p *Pool) settle(ex *execution, f domain.Finish) {
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

// isSuspend reports whether err asks to suspend the job (jobs.Sleep and
// the waits), unless a cancellation or a shutdown came first.
func isSuspend(err error) bool {
	_, ok := domain.AsSuspend(err)
	return ok
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
	if err := jobs.CheckJSON("result", b); err != nil {
		return nil, fmt.Errorf("handler returned a result that cannot be stored: %v", err)
	}
	return b, nil
}
