package workers

import (
	"context"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// rebalancer hands back, until ctx is done, the claimed jobs that wait in
// the buffer while every worker of this pool stays busy (rebalance).
func (p *Pool) rebalancer(ctx context.Context) {
	if p.cfg.ClaimAhead == 0 {
		return // no buffer: every claimed job has a worker
	}
	t := time.NewTicker(max(p.cfg.PollInterval/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.rebalance(ctx)
		}
	}
}

// rebalance hands back to the queue the jobs handed to the workers more
// than half a poll interval ago and still waiting for one, when no worker has become idle for that
// long either: the buffer is there to cover one claim's round trip, and
// jobs held behind handlers that run long would otherwise wait for them
// while another process has idle workers. They go back as if never
// claimed (Store.ReleaseJobs); the wake-up their move sends makes idle
// pools claim them at once. Their places in the buffer stay taken until a
// worker passes over them, so this pool does not claim them back before
// one of its workers is free. A job held until its run_at (holdUntilRunAt)
// waits for its time, not for a worker: it stays, and from its time it is
// given half a poll interval like a fresh claim.
func (p *Pool) rebalance(ctx context.Context) {
	hold := p.cfg.PollInterval / 2
	now := time.Since(p.epoch)
	if now-time.Duration(p.lastFreed.Load()) < hold {
		return // workers are moving: the buffer is doing its job
	}
	var leases []domain.Lease
	taken := map[domain.Lease]*execution{}
	p.running.Range(func(_, v any) bool {
		ex := v.(*execution)
		if r := ex.ready.Load(); r == 0 || now-time.Duration(r) < hold || ex.lost.Load() || context.Cause(ex.ctx) != nil || !ex.relMu.TryLock() {
			return true
		}
		if ex.taken || ex.released {
			ex.relMu.Unlock()
			return true
		}
		leases = append(leases, ex.lease)
		taken[ex.lease] = ex
		return true
	})
	if len(leases) == 0 {
		return
	}
	released := p.release(ctx, leases)
	for _, l := range released {
		ex := taken[l]
		ex.released = true
		p.running.CompareAndDelete(l.JobID, ex)
		ex.cancel(nil)
	}
	// The rest stay claimed here (a write failed, a cancel was asked for
	// meanwhile, the lease was lost): a worker takes them as usual.
	for _, ex := range taken {
		ex.relMu.Unlock()
	}
	if len(released) > 0 {
		p.logger.InfoContext(ctx, "handed back buffered jobs: every worker stayed busy", "jobs", len(released))
	}
}

// queuePaused reports whether this pool's store knows queue to be
// paused (or pushed to an endpoint).
func (p *Pool) queuePaused(queue string) bool {
	pq, ok := p.store.(pausedQueues)
	return ok && pq.QueuePaused(queue)
}

// handBack returns the job of ex, which a worker has taken but not
// started, to its queue as if never claimed, as rebalance does, and
// reports whether it did; a job the write did not release stays this
// worker's to run. A pause stops claims at once (the claim's version
// guard), but a job claimed just before it, ahead of a free worker, waits
// in the buffer: it must not start once the pool knows of the pause.
func (p *Pool) handBack(ex *execution) bool {
	if len(p.release(ex.ctx, []domain.Lease{ex.lease})) == 0 {
		return false
	}
	p.running.CompareAndDelete(ex.job.ID, ex)
	p.logger.Info("handed back a claimed job of a paused queue unstarted", "job_id", ex.job.ID, "queue", ex.job.Queue)
	return true
}

// release returns the jobs of leases, claimed here and not started, to
// their queues as if never claimed (Store.ReleaseJobs), and returns the
// leases it released; when the write's answer is lost it keeps those
// that still hold their jobs (releasedAfterAll).
func (p *Pool) release(ctx context.Context, leases []domain.Lease) []domain.Lease {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.HeartbeatInterval)
	defer cancel()
	p.leaseWrites.Lock()
	released, err := p.store.ReleaseJobs(wctx, leases)
	p.leaseWrites.Unlock()
	if err != nil {
		p.logger.WarnContext(ctx, "handing back buffered jobs failed; keeping those still ours", "error", err, "jobs", len(leases))
		released = p.releasedAfterAll(ctx, leases)
	}
	return released
}

// releasedAfterAll settles a hand-back whose answer was lost: the write
// may have committed (a timeout that struck after the commit), and a job
// it released may already be claimed again, here or elsewhere, so none
// of them may run from the buffer on the strength of the old lease; or it
// may not have reached the server yet, and commit later. It keeps those
// whose leases still hold their jobs (Store.KeepLeases: they stay claimed
// here, recorded as started, and the late hand-back releases none of
// them) and returns the others as released. When even that write fails,
// every one is given up: a job whose release did not commit then waits
// for its lease to lapse and the reaper, which costs it an interruption,
// never a second run.
func (p *Pool) releasedAfterAll(ctx context.Context, leases []domain.Lease) []domain.Lease {
	held, err := p.keepLeases(ctx, leases)
	if err != nil {
		p.logger.WarnContext(ctx, "could not keep the buffered jobs that are still ours; giving them up to the reaper", "error", err, "jobs", len(leases))
		return leases
	}
	ours := make(map[domain.Lease]bool, len(held))
	for _, l := range held {
		ours[l] = true
	}
	var gone []domain.Lease
	for _, l := range leases {
		if !ours[l] {
			gone = append(gone, l)
		}
	}
	return gone
}

// keepLeases keeps those of leases that still hold their jobs
// (Store.KeepLeases), up to five times, each write given longer than the
// hand-back it settles (whose deadline is the heartbeat interval,
// milliseconds in tests): giving up strands the jobs until their leases
// lapse. Once ctx is done (shutting down) it tries no more, so the drain
// does not wait for it.
func (p *Pool) keepLeases(ctx context.Context, leases []domain.Lease) (held []domain.Lease, err error) {
	for attempt := 1; attempt <= 5; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(time.Duration(attempt-1) * 100 * time.Millisecond):
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(p.cfg.HeartbeatInterval, 2*time.Second))
		held, err = p.store.KeepLeases(rctx, leases)
		cancel()
		if err == nil {
			return held, nil
		}
	}
	return nil, err
}
