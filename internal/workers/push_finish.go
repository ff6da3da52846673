package workers

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

// heartbeats extends the leases of open requests (a push may take up to
// its queue's timeout, longer than a lease) until ctx is done.
func (p *Pusher) heartbeats(ctx context.Context) {
	t := time.NewTicker(p.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		beats := make([]domain.Heartbeat, 0, len(p.inFlight))
		byID := make(map[uuid.UUID]*delivery, len(p.inFlight))
		for id, d := range p.inFlight {
			beats = append(beats, domain.Heartbeat{Lease: d.lease})
			byID[id] = d
		}
		p.mu.Unlock()
		if len(beats) == 0 {
			continue
		}
		bctx, cancel := context.WithTimeout(ctx, p.cfg.HeartbeatInterval)
		statuses, err := p.store.ExtendLeases(bctx, beats, p.cfg.LeaseTTL)
		cancel()
		if err != nil {
			p.logger.Warn("push heartbeat failed", "error", err, "jobs", len(beats))
			continue
		}
		for _, st := range statuses {
			delete(byID, st.JobID)
		}
		for id, d := range byID {
			p.mu.Lock()
			_, still := p.inFlight[id]
			p.mu.Unlock()
			if still {
				d.lost.Store(true)
				d.cancel(domain.ErrLeaseLost)
			}
		}
	}
}

// finisher writes outcomes and delivery records in batches, as the pool's
// finisher does.
func (p *Pusher) finisher() {
	for o := range p.outcomes {
		batch := []pushOutcome{o}
	fill:
		for len(batch) < 1000 {
			select {
			case o, ok := <-p.outcomes:
				if !ok {
					break fill
				}
				batch = append(batch, o)
			default:
				break fill
			}
		}
		p.write(batch)
	}
}

// write stores one batch, retrying while the database is unreachable.
func (p *Pusher) write(batch []pushOutcome) {
	var finishes []domain.Finish
	var records []domain.PushDelivery
	for _, o := range batch {
		if o.finish != nil {
			finishes = append(finishes, *o.finish)
		}
		if o.record.Outcome != "" {
			records = append(records, o.record)
		}
	}
	ctx := context.Background()
	for attempt := 1; len(finishes) > 0; attempt++ {
		moved, cascaded, err := p.store.FinishJobs(ctx, finishes)
		if err == nil {
			domain.LogFailures(ctx, p.logger, finishes, moved)
			if p.cfg.OnMoved != nil {
				var report []domain.Moved
				for _, m := range moved {
					if !m.LeaseLost() {
						report = append(report, m)
					}
				}
				if report = append(report, cascaded...); len(report) > 0 {
					p.cfg.OnMoved(report)
				}
			}
			break
		}
		if attempt >= 60 || isDataError(err) {
			p.logger.Error("writing push outcomes failed; the reaper will return the jobs", "error", err, "jobs", len(finishes))
			break
		}
		time.Sleep(min(time.Duration(attempt)*100*time.Millisecond, 2*time.Second))
	}
	if err := p.store.RecordPushDeliveries(ctx, records); err != nil {
		p.logger.Warn("recording push deliveries failed", "error", err, "deliveries", len(records))
	}
}
