package workers

import "time"

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

// untilRunAt is how long until ex's run_at: the shorter of what this
// process's clock says and what the database's clock says as the claim
// reckons it (see execution.claimedAt). The claim's reckoning runs behind
// by the claim statement's own time (its now() is its transaction's
// start), 20–30 ms on a busy server, so on a host whose clock agrees with
// the database's the local clock decides; on one whose clock runs behind
// it, the database's does.
func (ex *execution) untilRunAt() time.Duration {
	return min(time.Until(ex.job.RunAt), ex.job.RunAt.Sub(ex.claimedAt.Add(time.Since(ex.claimedLocal))))
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
