package workers

import (
	"context"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// startDelay is how long the starter lets a started handler run before it
// writes the start: a handler that ends sooner carries its start with its
// outcome (domain.Finish.StartedAt), so short jobs cost no write of their
// own. A job is shown claimed for at most this long after it started.
const startDelay = 20 * time.Millisecond

// starter writes the starts of handlers that are still running, so that
// their jobs show running (not claimed) while they run, until ctx is done.
// It looks again every startDelay while handlers younger than that run,
// and otherwise waits for the next start.
func (p *Pool) starter(ctx context.Context) {
	young := false
	for {
		if !young {
			select {
			case <-ctx.Done():
				return
			case <-p.startNow:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(startDelay):
		}
		young = p.writeStarts(ctx)
	}
}

// writeStarts writes, in one statement, the starts not yet written of the
// handlers that have run for startDelay and not returned; it reports
// whether younger ones run. A failed write leaves them to the next round
// or to their outcomes.
func (p *Pool) writeStarts(ctx context.Context) (young bool) {
	var starts []domain.Start
	var taken []*execution
	p.running.Range(func(_, v any) bool {
		ex := v.(*execution)
		at := ex.startAt.Load()
		if at == nil || ex.settled.Load() || ex.startWritten.Load() {
			return true
		}
		// The start on this process's clock: the claim's return plus the
		// claim-to-start gap.
		if time.Since(ex.claimedLocal)-at.Sub(ex.claimedAt) < startDelay {
			young = true
			return true
		}
		if !ex.startWritten.CompareAndSwap(false, true) {
			return true
		}
		starts = append(starts, domain.Start{Lease: ex.lease, At: *at})
		taken = append(taken, ex)
		return true
	})
	if len(starts) == 0 {
		return young
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
	return young
}
