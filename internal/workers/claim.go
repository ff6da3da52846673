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
