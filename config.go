package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"flint/jobs"
)

// Config is every setting of a Flint process, read from the environment and
// then from command-line flags.
type Config struct {
	Env         string // FLINT_ENV: development (default) or production
	DatabaseURL string // DATABASE_URL
	// DatabasePooler is what DATABASE_URL goes through: "none" or
	// "pgbouncer" (transaction pooling). FLINT_DATABASE_POOLER.
	DatabasePooler string
	// DirectDatabaseURL reaches PostgreSQL itself, for LISTEN and
	// migrations, when DATABASE_URL goes through a pooler.
	// FLINT_DIRECT_DATABASE_URL.
	DirectDatabaseURL string
	RedisURL          string // REDIS_URL; empty means PostgreSQL-only mode
	RedisPrefix       string // FLINT_REDIS_PREFIX
	// ReadyQueue picks how workers find the next jobs: "postgres" (claim
	// straight from the table) or "redis" (pop candidates from the Redis
	// ready queue first). FLINT_READY_QUEUE.
	ReadyQueue string
	Addr       string // FLINT_ADDR
	APIKey     string // FLINT_API_KEY
	// APIKeyGenerated is true when no key was configured and one was made
	// up for this run (development only); likewise the others.
	APIKeyGenerated        bool
	SessionKeyGenerated    bool
	AdminPasswordGenerated bool
	AdminEmail             string // FLINT_ADMIN_EMAIL
	AdminPassword          string // FLINT_ADMIN_PASSWORD
	SessionKey             string // FLINT_SESSION_KEY
	Workers                int    // FLINT_WORKERS
	Queues                 []string
	WorkerID               string // FLINT_WORKER_ID
	SMTPURL                string // SMTP_URL
	MailUIURL              string // FLINT_MAIL_UI_URL: the mail catcher's web UI, linked from the dashboard
	PublicURL              string // FLINT_PUBLIC_URL: the dashboard's address, for links in alert emails
	MetricsToken           string // FLINT_METRICS_TOKEN: bearer token /metrics requires ("" for none)
	MetricsAddr            string // FLINT_METRICS_ADDR: a separate listener for /metrics (worker and scheduler processes)
	SMTPFrom               string // FLINT_SMTP_FROM
	HTTPAllow              []string
	LogFile                string // FLINT_LOG_FILE: also log to this rotated file; "" or "-" for stdout only
	LogLevel               string // LOG_LEVEL
	LogFormat              string // LOG_FORMAT

	LeaseTTL          time.Duration // FLINT_LEASE_TTL
	HeartbeatInterval time.Duration // FLINT_HEARTBEAT_INTERVAL
	PollInterval      time.Duration // FLINT_POLL_INTERVAL
	ReapInterval      time.Duration // FLINT_REAP_INTERVAL
	PromoteInterval   time.Duration // FLINT_PROMOTE_INTERVAL: the promoter's backstop sweep
	DrainTimeout      time.Duration // FLINT_DRAIN_TIMEOUT
	MaxInterruptions  int           // FLINT_MAX_INTERRUPTIONS
}

// Production reports whether FLINT_ENV=production.
func (c *Config) Production() bool { return c.Env == "production" }

// defaultDatabaseURL is the database of a developer's machine (make run).
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/flint?sslmode=disable"

// loadConfig reads the environment, then the flags in args (which override
// it), and validates the result, reporting every problem at once.
func loadConfig(cmd string, args []string, getenv func(string) string) (*Config, error) {
	r := &configReader{getenv: getenv}
	c := readEnv(r)
	queues, allow := r.str("FLINT_QUEUES", ""), r.str("FLINT_HTTP_ALLOW", "")
	if err := c.parseFlags(cmd, args, &queues, r); err != nil {
		return nil, err
	}
	c.parseLists(queues, allow, r)
	c.validate(r)
	c.validateDatabase("flint "+cmd, rolesOf(cmd).migrates, r)
	c.settleSecrets(cmd, r)
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomToken(3))
	}
	if len(r.problems) > 0 {
		return nil, errors.New("invalid configuration:\n  - " + strings.Join(r.problems, "\n  - "))
	}
	return c, nil
}

// configReader reads settings from the environment and collects every
// problem it meets, so that one error can list them all.
type configReader struct {
	getenv   func(string) string // nil: the process environment
	problems []string
}

func (r *configReader) bad(format string, a ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, a...))
}

func (r *configReader) str(name, def string) string {
	if v, ok := lookup(r.getenv, name); ok {
		return v
	}
	return def
}

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
		MaxInterruptions:  r.int("FLINT_MAX_INTERRUPTIONS", jobs.DefaultMaxInterruptions),
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
	if hosts, err := jobs.ParseHTTPAllow(allow); err != nil {
		r.bad("FLINT_HTTP_ALLOW: %v", err)
	} else {
		c.HTTPAllow = hosts
	}
}

// validate checks every setting that has no secret in it.
func (c *Config) validate(r *configReader) {
	switch c.Env {
	case "development", "production":
	default:
		r.bad("FLINT_ENV=%q: want development or production", c.Env)
	}
	if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		r.bad("DATABASE_URL: want postgres://user@host:port/database")
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			r.bad("REDIS_URL: want redis://host:port/db, or empty for PostgreSQL-only mode")
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
}

// settleSecrets checks the API key, session key and admin password,
// generating the ones development leaves unset, and the addresses that go
// with them.
func (c *Config) settleSecrets(cmd string, r *configReader) {
	if c.APIKey == "" {
		if c.Production() && rolesOf(cmd).http {
			r.bad("FLINT_API_KEY is required when FLINT_ENV=production")
		}
		c.APIKey = randomToken(24)
		c.APIKeyGenerated = true
	} else if len(c.APIKey) < 16 {
		r.bad("FLINT_API_KEY: use at least 16 characters")
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.bad("FLINT_PUBLIC_URL=%q: want the dashboard's http(s) address", c.PublicURL)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			r.bad("FLINT_METRICS_ADDR=%q: want host:port or :port", c.MetricsAddr)
		}
	}
	if c.MailUIURL == "" && !c.Production() {
		c.MailUIURL = "http://localhost:8025"
	}
	if c.MailUIURL != "" {
		if u, err := url.Parse(c.MailUIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			r.bad("FLINT_MAIL_UI_URL=%q: want an http(s) URL", c.MailUIURL)
		}
	}
	if c.SessionKey == "" {
		if c.Production() && rolesOf(cmd).http {
			r.bad("FLINT_SESSION_KEY is required when FLINT_ENV=production (32+ random characters)")
		}
		c.SessionKey = randomToken(32)
		c.SessionKeyGenerated = true
	} else if len(c.SessionKey) < 32 {
		r.bad("FLINT_SESSION_KEY: use at least 32 characters")
	}
	if c.AdminPassword == "" {
		c.AdminPassword = randomToken(9)
		c.AdminPasswordGenerated = true
	} else if len(c.AdminPassword) < 8 || len(c.AdminPassword) > 72 {
		r.bad("FLINT_ADMIN_PASSWORD: use 8 to 72 characters")
	}
	if !strings.Contains(c.AdminEmail, "@") || !jobs.CleanText(c.AdminEmail) {
		r.bad("FLINT_ADMIN_EMAIL=%q: want an email address", c.AdminEmail)
	}
	if c.Production() && rolesOf(cmd).http {
		checkProductionSecrets(c, readDevEnv(devEnvFile), r.bad)
	}
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

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// devEnvFile holds the secrets `make run` generates for development.
const devEnvFile = ".flint/dev.env"

// devSecretMarkers appear in the development defaults Flint ships (the
// compose file's "…-change-me" values) and in placeholders people copy.
var devSecretMarkers = []string{"change-me", "changeme", "change_me", "dev-api-key", "dev-password", "example", "secret", "password"}

// checkProductionSecrets refuses, in production, a secret that is a known
// development value (a shipped default, or the one `make run` wrote to
// .flint/dev.env), too short, or too simple, naming the setting to change.
// Generated secrets are random and pass.
func checkProductionSecrets(c *Config, devEnv map[string]string, bad func(string, ...any)) {
	check := func(name, value string, generated bool, min int) {
		if generated || value == "" {
			return
		}
		low := strings.ToLower(value)
		for _, m := range devSecretMarkers {
			if strings.Contains(low, m) {
				bad("%s looks like a development or placeholder value (it contains %q); set a random secret of your own for FLINT_ENV=production", name, m)
				return
			}
		}
		if devEnv[name] == value {
			bad("%s is the development value from %s; set a different secret for FLINT_ENV=production", name, devEnvFile)
			return
		}
		if len(value) < min {
			bad("%s: use at least %d characters when FLINT_ENV=production", name, min)
			return
		}
		distinct := map[rune]bool{}
		for _, r := range value {
			distinct[r] = true
		}
		if len(distinct) < 8 {
			bad("%s is too simple (%d different characters); use a random secret for FLINT_ENV=production", name, len(distinct))
		}
	}
	check("FLINT_API_KEY", c.APIKey, c.APIKeyGenerated, 24)
	check("FLINT_SESSION_KEY", c.SessionKey, c.SessionKeyGenerated, 32)
	check("FLINT_ADMIN_PASSWORD", c.AdminPassword, c.AdminPasswordGenerated, 12)
}

// readDevEnv reads KEY=value lines of the development settings file; a
// missing or unreadable file is an empty map.
func readDevEnv(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}
