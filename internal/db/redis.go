package db

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is Flint's optional fast path: the ready queue, the event
// transport and the worker registry. It never holds anything PostgreSQL
// lacks, so losing it, flushing it or starting without it loses nothing:
// callers check Healthy and fall back to PostgreSQL.
type Redis struct {
	client  *redis.Client
	prefix  string
	logger  *slog.Logger
	healthy atomic.Bool

	mu        sync.Mutex
	onRecover []func()
}

// OpenRedis configures a client for url with every key under prefix. It
// does not fail when Redis is down: Run keeps checking, and Healthy says
// whether to use it.
func OpenRedis(ctx context.Context, url, prefix string, logger *slog.Logger) (*Redis, error) {
	client, err := newRedisClient(url)
	if err != nil {
		return nil, err
	}
	redisLogOnce.Do(func() { redis.SetLogger(redisLog{logger.With("component", "redis")}) })
	r := &Redis{client: client, prefix: prefix, logger: logger.With("component", "redis")}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.client.Ping(pctx).Err(); err != nil {
		r.logger.WarnContext(ctx, "redis is unreachable; running from PostgreSQL alone until it answers", "error", err)
	} else {
		r.healthy.Store(true)
	}
	return r, nil
}

// Client exposes the underlying client, for tests that inspect or break
// what Flint keeps in Redis.
func (r *Redis) Client() *redis.Client { return r.client }

// Healthy reports whether Redis answered its last check.
func (r *Redis) Healthy() bool { return r != nil && r.healthy.Load() }

// OnRecover registers fn to run whenever Redis comes back (and once at
// start when it is up), to rebuild what it holds from PostgreSQL.
func (r *Redis) OnRecover(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onRecover = append(r.onRecover, fn)
}

// MarkDown records a failed command, so callers fall back at once instead
// of waiting for the next check.
func (r *Redis) MarkDown(err error) {
	if r.healthy.CompareAndSwap(true, false) {
		r.logger.Warn("redis failed; falling back to PostgreSQL", "error", err)
	}
}

// Run checks Redis every second until ctx is done, and runs the recovery
// callbacks when it comes back.
func (r *Redis) Run(ctx context.Context) error {
	first := true
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.client.Ping(pctx).Err()
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		was := r.healthy.Load()
		switch {
		case err != nil && was:
			r.MarkDown(err)
		case err == nil && (!was || first):
			r.healthy.Store(true)
			if !was {
				r.logger.InfoContext(ctx, "redis is back; rebuilding the fast path from PostgreSQL")
			}
			r.mu.Lock()
			fns := append([]func(){}, r.onRecover...)
			r.mu.Unlock()
			for _, fn := range fns {
				fn()
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close closes the client. Close it after the store and the event bus
// that use it have stopped.
func (r *Redis) Close() error { return r.client.Close() }

// Keys. Every key Flint uses comes from here, under the configured prefix.
func (r *Redis) readyKey() string           { return r.prefix + "ready" }
func (r *Redis) eventsChannel() string      { return r.prefix + "events" }
func (r *Redis) workersKey() string         { return r.prefix + "workers" }
func (r *Redis) workerKey(id string) string { return r.prefix + "worker:" + id }

// readyScore orders the ready queue like the claim: effective priority
// first (in tenths), then run_at in milliseconds since 2020. Both fit a
// float64's 53-bit mantissa exactly.
func readyScore(priority float64, runAt time.Time) float64 {
	tenths := math.Round(priority * 10)
	ms := runAt.UnixMilli() - epoch2020
	if ms < 0 {
		ms = 0
	}
	return tenths*float64(int64(1)<<42) + float64(ms)
}

var epoch2020 = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// redisLog sends the client library's own messages (mostly dial failures
// while Redis is down, which the health monitor already reports) to the
// debug log instead of standard error.
type redisLog struct{ logger *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.logger.DebugContext(ctx, "redis client", "message", fmt.Sprintf(format, v...))
}

var redisLogOnce sync.Once
