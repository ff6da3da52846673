package workers

import "github.com/flinthq/flint/internal/domain"

// handBackUnstarted begins the drain: claiming has stopped, and the jobs
// claimed but not started (held until their run_at, or waiting in the
// buffer) go back to the queue at once, alongside the workers.
func (p *Pool) handBackUnstarted() {
	p.draining.Store(true)
	close(p.drained)
	held := p.takeHeld()
	close(p.work)
	for _, ex := range held {
		p.execute(ex) // not started: handed back
	}
	for ex := range p.work {
		p.execute(ex)
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
		p.finishes <- domain.Finish{Lease: ex.lease, Outcome: domain.OutcomeInterrupted,
			Error: "interrupted: worker " + p.cfg.WorkerID + " shut down and the handler did not stop", Log: ex.takeLog()}
		return true
	})
}
