package workers

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

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
	var beats []domain.Heartbeat
	byID := map[uuid.UUID]*execution{}
	p.running.Range(func(_, v any) bool {
		ex := v.(*execution)
		if d := ex.deadline.Load(); !ex.settled.Load() && d != 0 && now.After(time.Unix(0, d).Add(p.cfg.TimeoutGrace)) {
			// The handler ignores its context: stop vouching for it.
			return true
		}
		beats = append(beats, domain.Heartbeat{Lease: ex.lease, Progress: ex.progress.Swap(nil)})
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
			ex.cancel(domain.ErrLeaseLost)
			p.logger.WarnContext(ctx, "lease lost; stopping job", "job_id", id, "type", ex.job.Type)
		}
	}
}
