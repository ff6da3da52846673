package app

import (
	"net"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/jobs"
)

// validate checks every setting that has no secret in it.
func (c *Config) validate(r *configReader) {
	switch c.Env {
	case "development", "production":
	default:
		r.bad("FLINT_ENV=%q: want development or production", c.Env)
	}
	if err := db.CheckConnString("DATABASE_URL", c.DatabaseURL); err != nil {
		r.bad("%s", err)
	}
	if c.RedisURL != "" {
		if err := db.CheckRedisURL(c.RedisURL); err != nil {
			r.bad("%s", err)
		}
	}
	switch c.ReadyQueue {
	case "postgres", "redis":
	default:
		r.bad("FLINT_READY_QUEUE=%q: want postgres or redis", c.ReadyQueue)
	}
	if c.RedisPrefix == "" || len(c.RedisPrefix) > 64 || !jobs.CleanText(c.RedisPrefix) {
		r.bad("FLINT_REDIS_PREFIX=%q: want 1 to 64 printable characters", c.RedisPrefix)
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		r.bad("FLINT_ADDR=%q: want host:port or :port", c.Addr)
	}
	if c.Workers < 1 || c.Workers > 10000 {
		r.bad("FLINT_WORKERS=%d: want 1 to 10000", c.Workers)
	}
	if c.PushConcurrency < 1 || c.PushConcurrency > 10000 {
		r.bad("FLINT_PUSH_CONCURRENCY=%d: want 1 to 10000", c.PushConcurrency)
	}
	for _, q := range c.Queues {
		if !jobs.ValidQueue(q) {
			r.bad("FLINT_QUEUES: %q is not a valid queue name (1-%d letters, digits or _ . : -)", q, jobs.MaxQueueLen)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		r.bad("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		r.bad("LOG_FORMAT=%q: want json or text", c.LogFormat)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"FLINT_LEASE_TTL", c.LeaseTTL}, {"FLINT_HEARTBEAT_INTERVAL", c.HeartbeatInterval},
		{"FLINT_POLL_INTERVAL", c.PollInterval}, {"FLINT_REAP_INTERVAL", c.ReapInterval},
		{"FLINT_PROMOTE_INTERVAL", c.PromoteInterval}, {"FLINT_DRAIN_TIMEOUT", c.DrainTimeout},
	} {
		if d.v <= 0 {
			r.bad("%s=%s: must be positive", d.name, d.v)
		}
	}
	if c.HeartbeatInterval > 0 && c.LeaseTTL > 0 && c.HeartbeatInterval*2 > c.LeaseTTL {
		r.bad("FLINT_HEARTBEAT_INTERVAL=%s must be at most half of FLINT_LEASE_TTL=%s, or a single late heartbeat loses the lease",
			c.HeartbeatInterval, c.LeaseTTL)
	}
	if c.MaxInterruptions < 1 || c.MaxInterruptions > 100 {
		r.bad("FLINT_MAX_INTERRUPTIONS=%d: want 1 to 100", c.MaxInterruptions)
	}
	if c.EnqueueWindow < 0 || c.EnqueueWindow > time.Second {
		r.bad("FLINT_ENQUEUE_WINDOW=%s: want 0 (off) to 1s", c.EnqueueWindow)
	}
	if c.EnqueueBatch < 1 || c.EnqueueBatch > 10000 {
		r.bad("FLINT_ENQUEUE_BATCH=%d: want 1 to 10000", c.EnqueueBatch)
	}
}
