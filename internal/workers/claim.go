package workers

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// produce claims jobs while there are idle workers and work is likely to
// exist, until ctx is done.
func (p *Pool) produce(ctx context.Context) {
	poll := time.NewTicker(p.cfg.PollInterval)
	defer poll.Stop()
	more := true // work may be waiting: start with a claim
	failures := 0
	var retry <-chan time.Time // a rate limit allows the next start
	for ctx.Err() == nil {
		// free counts idle workers plus every place in the claim-ahead
		// buffer; only aheadNow of those places are used.
		if free := int(p.free.Load()) - p.cfg.ClaimAhead + p.aheadNow(); more && free > 0 {
			limit := min(free, p.cfg.FetchLimit)
			began := time.Now()
			claimed, held, err := p.claim(ctx, limit)
			movingAverage(&p.claimAvg, time.Since(began))
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
			back := time.Now()
			for _, j := range claimed {
				ex := &execution{job: j, lease: domain.LeaseOf(j), claimedAt: j.UpdatedAt, claimedLocal: back}
				ex.ctx, ex.cancel = context.WithCancelCause(p.jobsCtx)
				p.running.Store(j.ID, ex) // heartbeated from now on
				if p.holdUntilRunAt(ex) {
					continue
				}
				p.free.Add(-1)
				p.handOver(ex)
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
func (p *Pool) claim(ctx context.Context, limit int) (claimed []*jobs.Job, held domain.FlowHold, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LeaseTTL)
	defer cancel()
	params := domain.ClaimParams{WorkerID: p.cfg.WorkerID, Queues: p.cfg.Queues, Types: p.registry.Types(), Limit: limit,
		LeaseTTL: p.cfg.LeaseTTL, Buffered: true}
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

// movingAverage folds sample into avg with weight 1/8 (the first sample
// is taken whole).
func movingAverage(avg *atomic.Int64, sample time.Duration) {
	for {
		old := avg.Load()
		next := int64(sample)
		if old != 0 {
			next = old + (int64(sample)-old)/8
		}
		if next == 0 {
			next = 1
		}
		if avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// aheadNow is how many jobs to claim beyond the idle workers: as many as
// the workers are expected to finish while one claim is on its way (all of
// Workers × claim time / run time, capped at ClaimAhead), and none until a
// handler has finished, so a burst of long jobs is never claimed faster
// than workers start them.
func (p *Pool) aheadNow() int {
	run, rt := p.runAvg.Load(), p.claimAvg.Load()
	if p.cfg.ClaimAhead == 0 || run == 0 || rt == 0 {
		return 0
	}
	ahead := int64(p.cfg.Workers) * rt / run
	return int(min(ahead, int64(p.cfg.ClaimAhead)))
}

// pausedQueues is implemented by stores that know which queues are paused
// (*db.Store): the pool ignores wake-ups for them.
type pausedQueues interface {
	QueuePaused(queue string) bool
}

// Jobs claimed ahead of their time.
//
// The promoter queues scheduled jobs and sleepers shortly before their
// run_at (scheduler.DefaultPromoteAhead), so that the promotion, the
// wake-up and the claim are behind them when their time comes. Such a
// job is held here, on a timer, until its run_at, and then handed to the
// workers like any claimed job: it holds no worker, and it does not count
// against the places the pool claims for (a stream of sleepers waking
// would otherwise fill them with jobs that wait). It is heartbeated from
// its claim (it is in running), shown as claimed, and on shutdown handed
// back unstarted with the rest of the buffer.

// holdUntilRunAt holds ex until its run_at when that is still ahead, and
// says whether it did.
func (p *Pool) holdUntilRunAt(ex *execution) bool {
	wait := ex.untilRunAt()
	if wait <= 0 {
		return false
	}
	p.heldMu.Lock()
	defer p.heldMu.Unlock()
	if p.heldClosed {
		return false
	}
	p.held[ex] = time.AfterFunc(wait, func() { p.releaseHeld(ex) })
	return true
}

// releaseHeld hands a held job to the workers at its time. The send may
// wait for a place while every worker is busy; a drain that begins
// meanwhile takes the job back (takeHeld).
func (p *Pool) releaseHeld(ex *execution) {
	p.heldMu.Lock()
	if _, ok := p.held[ex]; !ok || p.heldClosed {
		p.heldMu.Unlock()
		return // the drain took it
	}
	delete(p.held, ex)
	p.releasing.Add(1)
	p.heldMu.Unlock()
	defer p.releasing.Done()
	p.free.Add(-1)
	p.handOver(ex)
	select {
	case p.work <- ex:
	case <-p.drained:
		p.free.Add(1)
		p.heldMu.Lock()
		p.unsent = append(p.unsent, ex)
		p.heldMu.Unlock()
	}
}

// takeHeld stops holding, once the drain has begun: it returns the jobs
// still held and those whose release the drain interrupted, for the drain
// to hand back, once no release is on its way to the work channel.
func (p *Pool) takeHeld() []*execution {
	p.heldMu.Lock()
	p.heldClosed = true
	out := make([]*execution, 0, len(p.held))
	for ex, t := range p.held {
		t.Stop()
		out = append(out, ex)
	}
	p.held = nil
	p.heldMu.Unlock()
	p.releasing.Wait()
	p.heldMu.Lock()
	defer p.heldMu.Unlock()
	return append(out, p.unsent...)
}

// handOver records when ex goes to the workers (see execution.ready).
func (p *Pool) handOver(ex *execution) {
	ex.ready.Store(max(int64(time.Since(p.epoch)), 1))
}

// Held returns how many claimed jobs the pool holds until their run_at.
func (p *Pool) Held() int {
	p.heldMu.Lock()
	defer p.heldMu.Unlock()
	return len(p.held)
}
