package scheduler

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// runLoop calls pass at once and then every interval (with up to 10%
// jitter so that processes started together spread out), until ctx is done.
// A pass that moved a full batch runs again at once.
func runLoop(ctx context.Context, logger *slog.Logger, interval time.Duration, pass func(context.Context) (int, bool, error)) error {
	return runLoopKicked(ctx, logger, interval, nil, pass)
}

// runLoopKicked is runLoop that also runs a pass whenever kick fires.
func runLoopKicked(ctx context.Context, logger *slog.Logger, interval time.Duration, kick <-chan struct{}, pass func(context.Context) (int, bool, error)) error {
	logger.DebugContext(ctx, "loop started", "interval", interval)
	defer logger.DebugContext(ctx, "loop stopped")
	for {
		for {
			pctx, cancel := context.WithTimeout(ctx, max(interval, 30*time.Second))
			n, full, err := pass(pctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				logger.WarnContext(ctx, "pass failed", "error", err)
				break
			}
			if n > 0 {
				logger.DebugContext(ctx, "pass moved jobs", "count", n)
			}
			if !full {
				break
			}
		}
		jitter := time.Duration(rand.Int64N(int64(interval)/10 + 1))
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-time.After(interval + jitter):
		}
	}
}

// countByStatus summarises moved jobs for a log line.
func countByStatus(moved []domain.Moved) map[jobs.State]int {
	out := map[jobs.State]int{}
	for _, m := range moved {
		out[m.Status]++
	}
	return out
}
