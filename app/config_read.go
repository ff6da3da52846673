package app

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// configReader reads settings from the environment and collects every
// problem it meets, so that one error can list them all.
type configReader struct {
	getenv   func(string) string // nil: the process environment
	problems []string
}

// bad records a problem; LoadConfig reports them all at the end.
func (r *configReader) bad(format string, a ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, a...))
}

// str is setting name, or def when it is unset.
func (r *configReader) str(name, def string) string {
	if v, ok := lookup(r.getenv, name); ok {
		return v
	}
	return def
}

// int is setting name as a whole number, or def when it is unset or
// (recorded as a problem) not a number.
func (r *configReader) int(name string, def int) int {
	v, ok := lookup(r.getenv, name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		r.bad("%s=%q: want a whole number", name, v)
		return def
	}
	return n
}

// dur is setting name as a duration, or def when it is unset or
// (recorded as a problem) not a duration.
func (r *configReader) dur(name string, def time.Duration) time.Duration {
	v, ok := lookup(r.getenv, name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		r.bad("%s=%q: want a duration such as 30s or 500ms", name, v)
		return def
	}
	return d
}

// lookup reads an environment variable, treating unset and set-but-empty
// differently only for REDIS_URL-like settings where empty has a meaning.
func lookup(getenv func(string) string, name string) (string, bool) {
	if getenv == nil {
		return os.LookupEnv(name)
	}
	v := getenv(name)
	return v, v != ""
}

// readEnv reads every setting from the environment, with its default.
func readEnv(r *configReader) *Config {
	return &Config{
		Env:               r.str("FLINT_ENV", "development"),
		DatabaseURL:       r.str("DATABASE_URL", defaultDatabaseURL),
		DatabasePooler:    r.str("FLINT_DATABASE_POOLER", poolerNone),
		DirectDatabaseURL: r.str("FLINT_DIRECT_DATABASE_URL", ""),
		RedisURL:          r.str("REDIS_URL", "redis://127.0.0.1:6379/0"),
		RedisPrefix:       r.str("FLINT_REDIS_PREFIX", "flint:"),
		ReadyQueue:        r.str("FLINT_READY_QUEUE", "postgres"),
		Addr:              r.str("FLINT_ADDR", ":8080"),
		APIKey:            r.str("FLINT_API_KEY", ""),
		AdminEmail:        r.str("FLINT_ADMIN_EMAIL", "admin@flint.local"),
		AdminPassword:     r.str("FLINT_ADMIN_PASSWORD", ""),
		SessionKey:        r.str("FLINT_SESSION_KEY", ""),
		Workers:           r.int("FLINT_WORKERS", 25*runtime.GOMAXPROCS(0)),
		PushConcurrency:   r.int("FLINT_PUSH_CONCURRENCY", 100),
		WorkerID:          r.str("FLINT_WORKER_ID", ""),
		SMTPURL:           r.str("SMTP_URL", "smtp://127.0.0.1:1025"),
		MailUIURL:         r.str("FLINT_MAIL_UI_URL", ""),
		MetricsToken:      r.str("FLINT_METRICS_TOKEN", ""),
		PublicURL:         r.str("FLINT_PUBLIC_URL", "http://localhost:8080"),
		MetricsAddr:       r.str("FLINT_METRICS_ADDR", ""),
		SMTPFrom:          r.str("FLINT_SMTP_FROM", "Flint <flint@localhost>"),
		LogFile:           r.str("FLINT_LOG_FILE", ""),
		LogLevel:          r.str("LOG_LEVEL", "info"),
		LogFormat:         r.str("LOG_FORMAT", "json"),
		LeaseTTL:          r.dur("FLINT_LEASE_TTL", 30*time.Second),
		HeartbeatInterval: r.dur("FLINT_HEARTBEAT_INTERVAL", 5*time.Second),
		PollInterval:      r.dur("FLINT_POLL_INTERVAL", time.Second),
		ReapInterval:      r.dur("FLINT_REAP_INTERVAL", 5*time.Second),
		PromoteInterval:   r.dur("FLINT_PROMOTE_INTERVAL", 15*time.Second),
		DrainTimeout:      r.dur("FLINT_DRAIN_TIMEOUT", 30*time.Second),
		MaxInterruptions:  r.int("FLINT_MAX_INTERRUPTIONS", domain.DefaultMaxInterruptions),
		EnqueueWindow:     r.dur("FLINT_ENQUEUE_WINDOW", db.DefaultEnqueueWindow),
		EnqueueBatch:      r.int("FLINT_ENQUEUE_BATCH", db.DefaultEnqueueBatch),
	}
}

// parseFlags applies the command's flags over the environment.
func (c *Config) parseFlags(cmd string, args []string, queues *string, r *configReader) error {
	fs := flag.NewFlagSet("flint "+cmd, flag.ContinueOnError)
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL connection string (DATABASE_URL)")
	fs.StringVar(&c.RedisURL, "redis-url", c.RedisURL, "Redis URL; empty for PostgreSQL-only mode (REDIS_URL)")
	if rolesOf(cmd).http {
		fs.StringVar(&c.Addr, "addr", c.Addr, "HTTP listen address (FLINT_ADDR)")
	}
	if rolesOf(cmd).workers {
		fs.IntVar(&c.Workers, "workers", c.Workers, "jobs run at once in this process (FLINT_WORKERS)")
		fs.StringVar(queues, "queues", *queues, "comma-separated queues to work; empty for all (FLINT_QUEUES)")
	}
	if cmd == "migrate" {
		fs.BoolVar(&c.MigrateForce, "force", false,
			"apply migrations marked flint:breaks-before even while older Flint processes run (see docs/faults.md)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		r.bad("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// parseLists splits FLINT_QUEUES and parses FLINT_HTTP_ALLOW.
func (c *Config) parseLists(queues, allow string, r *configReader) {
	for _, q := range strings.Split(queues, ",") {
		if q = strings.TrimSpace(q); q != "" {
			c.Queues = append(c.Queues, q)
		}
	}
	if hosts, err := domain.ParseHTTPAllow(allow); err != nil {
		r.bad("FLINT_HTTP_ALLOW: %v", err)
	} else {
		c.HTTPAllow = hosts
	}
}

// parseProxies reads FLINT_TRUSTED_PROXIES: addresses or CIDRs.
func parseProxies(list string, r *configReader) []netip.Prefix {
	var out []netip.Prefix
	for _, part := range strings.Split(list, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				r.bad("FLINT_TRUSTED_PROXIES: %q is neither an address nor a CIDR", part)
				continue
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out
}

// parseJobTypes splits FLINT_JOB_TYPES.
func (c *Config) parseJobTypes(list string, r *configReader) []string {
	var out []string
	for _, t := range strings.Split(list, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !jobs.ValidType(t) {
			r.bad("FLINT_JOB_TYPES: %q is not a valid job type (1-%d letters, digits or _ . : / -)", t, jobs.MaxTypeLen)
			continue
		}
		out = append(out, t)
	}
	return out
}
