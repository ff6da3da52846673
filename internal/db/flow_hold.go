package db

import (
	"context"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// flowHoldSQL says, after a claim that came back short, for each limited
// queue it served: its bucket, whether it still has queued jobs (so the
// pool knows whether and when to claim again) and, for a fair queue,
// whether any of them carries a key (which claimLimitedSQL leaves to
// claimFlowSQL). A claim that came back full needs none of it: the pool
// claims again as soon as a worker is free.
const flowHoldSQL = `
SELECT s.name, s.rate_limit, s.rate_period_seconds, s.tokens, extract(epoch FROM now() - s.tokens_at),
       EXISTS (SELECT 1 FROM jobs j WHERE j.status = 'queued' AND j.deleted_at IS NULL AND j.queue = s.name),
       s.per_key_concurrency IS NOT NULL AND EXISTS (SELECT 1 FROM jobs k WHERE ` + queuedKeyed + ` AND k.queue = s.name)
FROM queues s
WHERE s.name = ANY($1) AND NOT s.paused`

// keyedFor is how long a fair queue found with keyed jobs is claimed
// through claimFlowSQL before claimLimitedSQL is tried again.
const keyedFor = time.Second

// flowHold reads flowHoldSQL: what holds the limited queues back, and
// whether a fair one has keyed jobs waiting.
func (s *Store) flowHold(ctx context.Context, limited []string) (hold domain.FlowHold, keyed bool, err error) {
	rows, err := s.pool.Query(ctx, flowHoldSQL, limited)
	if err != nil {
		return hold, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var rate, period *int32
		var tokens, elapsed float64
		var waiting, hasKeys bool
		if err := rows.Scan(&name, &rate, &period, &tokens, &elapsed, &waiting, &hasKeys); err != nil {
			return hold, false, err
		}
		if hasKeys {
			s.keyed.Store(name, time.Now().Add(keyedFor))
			keyed = true
		}
		if !waiting {
			continue
		}
		hold.Waiting = true
		if rate == nil || period == nil {
			continue
		}
		rl := domain.RateLimit{Limit: int(*rate), PeriodSeconds: int(*period)}
		now := min(rl.Burst(), tokens+max(0, elapsed)*float64(rl.Limit)/float64(rl.PeriodSeconds))
		if now < 1 {
			wait := time.Duration((1 - now) * float64(rl.Interval()))
			if hold.RetryAfter == 0 || wait < hold.RetryAfter {
				hold.RetryAfter = wait
			}
		}
	}
	return hold, keyed, rows.Err()
}

// keyedHint says whether a fair queue had queued jobs with a key within
// the last keyedFor.
func (s *Store) keyedHint(queue string) bool {
	v, ok := s.keyed.Load(queue)
	return ok && time.Now().Before(v.(time.Time))
}
