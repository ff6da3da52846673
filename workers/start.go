package workers

import (
	"context"
	"time"

	"github.com/flinthq/flint/jobs"
)

// startDelay is how long the starter lets a started handler run before it
// writes the start: a handler that ends sooner carries its start with its
// outcome (jobs.Finish.StartedAt), so short jobs cost no write of their
// own. A job is shown claimed for at most this long after it started.
const startDelay = 20 * time.Millisecond

// starter writes the starts of handlers that are still running, so that
// their jobs show running (not claimed) while they run, until ctx is done.
func (p *Pool) starter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.startNow:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(startDelay):
		}
		p.writeStarts(ctx)
	}
}

// writeStarts writes, in one statement, the starts not yet written of the
// handlers that have not returned. A failed write leaves them to the next
// round or to their outcomes.
func (p *Pool) writeStarts(ctx context.Context) {
	var starts []jobs.Start
	var taken []*execution
	p.running.Range(func(_, v any) bool {
		ex := v.(*execution)
		at := ex.startAt.Load()
		if at == nil || ex.settled.Load() || !ex.startWritten.CompareAndSwap(false, true) {
			return true
		}
		starts = append(starts, jobs.Start{Lease: ex.lease, At: *at})
		taken = append(taken, ex)
		return true
	})
	if len(starts) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.HeartbeatInterval)
	defer cancel()
	p.leaseWrites.Lock()
	err := p.store.StartJobs(wctx, starts)
	p.leaseWrites.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			p.logger.WarnContext(ctx, "writing job starts failed", "error", err, "jobs", len(starts))
		}
		for _, ex := range taken {
			ex.startWritten.Store(false)
		}
		time.AfterFunc(time.Second, func() { signal(p.startNow) })
	}
}
