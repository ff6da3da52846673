package app

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Config is every setting of a Flint process, read from the environment and
// then from command-line flags (LoadConfig). A program that builds one
// itself starts from LoadConfig's result and changes fields: the
// validation and defaults live there.
type Config struct {
	// Command is the role this process runs: serve, api, worker,
	// scheduler or migrate.
	Command string
	// MigrateForce applies migrations that older running processes
	// cannot live with (flint migrate --force; db.MigrateOptions).
	MigrateForce bool
	Env          string // FLINT_ENV: development (default) or production
	DatabaseURL  string // DATABASE_URL
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
	// up for this run (development only); SessionKeyGenerated and
	// AdminPasswordGenerated say the same of theirs.
	APIKeyGenerated        bool
	SessionKeyGenerated    bool   // the session key was made up for this run
	AdminPasswordGenerated bool   // the admin password was made up for this run
	AdminEmail             string // FLINT_ADMIN_EMAIL
	AdminPassword          string // FLINT_ADMIN_PASSWORD
	SessionKey             string // FLINT_SESSION_KEY
	Workers                int    // FLINT_WORKERS
	PushConcurrency        int    // FLINT_PUSH_CONCURRENCY: requests to push endpoints open at once in this process
	// Queues are the queues this process's workers claim from
	// (FLINT_QUEUES or -queues, comma-separated); empty means every queue.
	Queues []string
	// JobTypes are types the API accepts without a handler here or a
	// worker seen serving them (FLINT_JOB_TYPES, comma-separated): for
	// workers that have not started yet.
	JobTypes     []string
	WorkerID     string // FLINT_WORKER_ID
	SMTPURL      string // SMTP_URL
	MailUIURL    string // FLINT_MAIL_UI_URL: the mail catcher's web UI, linked from the dashboard
	PublicURL    string // FLINT_PUBLIC_URL: the dashboard's address, for links in alert emails
	MetricsToken string // FLINT_METRICS_TOKEN: bearer token /metrics requires ("" for none)
	MetricsAddr  string // FLINT_METRICS_ADDR: a separate listener for /metrics (worker and scheduler processes)
	SMTPFrom     string // FLINT_SMTP_FROM
	// HTTPAllow are the private destinations (CIDRs, addresses, host
	// names, with or without a port) that outgoing requests may reach
	// despite the SSRF guard: the http_request job, push queues and alert
	// webhooks (FLINT_HTTP_ALLOW, as domain.ParseHTTPAllow reads it).
	HTTPAllow []string
	// TrustedProxies are the reverse proxies in front of the HTTP server
	// whose X-Forwarded-For names the client (FLINT_TRUSTED_PROXIES,
	// comma-separated addresses or CIDRs); empty trusts none.
	TrustedProxies []netip.Prefix
	LogFile        string // FLINT_LOG_FILE: also log to this rotated file; "" or "-" for stdout only
	LogLevel       string // LOG_LEVEL
	LogFormat      string // LOG_FORMAT

	LeaseTTL          time.Duration // FLINT_LEASE_TTL
	HeartbeatInterval time.Duration // FLINT_HEARTBEAT_INTERVAL
	PollInterval      time.Duration // FLINT_POLL_INTERVAL
	ReapInterval      time.Duration // FLINT_REAP_INTERVAL
	PromoteInterval   time.Duration // FLINT_PROMOTE_INTERVAL: the promoter's backstop sweep
	DrainTimeout      time.Duration // FLINT_DRAIN_TIMEOUT
	MaxInterruptions  int           // FLINT_MAX_INTERRUPTIONS
	// EnqueueWindow is how long a group commit of single enqueues waits
	// for more jobs after its first (FLINT_ENQUEUE_WINDOW); 0 turns group
	// commit off.
	EnqueueWindow time.Duration
	EnqueueBatch  int // FLINT_ENQUEUE_BATCH: the most jobs of one group commit
}

// Production reports whether FLINT_ENV=production.
func (c *Config) Production() bool { return c.Env == "production" }

// defaultDatabaseURL is the database of a developer's machine (make run).
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/flint?sslmode=disable"

// LoadConfig reads the settings of command cmd (serve, api, worker,
// scheduler or migrate) from the environment, then from the flags in args
// (which override it), and validates the result, reporting every problem
// at once. getenv nil means the process environment. With "-h" in args
// it prints the command's flags and returns flag.ErrHelp.
func LoadConfig(cmd string, args []string, getenv func(string) string) (*Config, error) {
	switch cmd {
	case "serve", "api", "worker", "scheduler", "migrate":
	default:
		return nil, fmt.Errorf("unknown command %q: want serve, api, worker, scheduler or migrate", cmd)
	}
	r := &configReader{getenv: getenv}
	c := readEnv(r)
	c.Command = cmd
	queues, allow := r.str("FLINT_QUEUES", ""), r.str("FLINT_HTTP_ALLOW", "")
	c.JobTypes = c.parseJobTypes(r.str("FLINT_JOB_TYPES", ""), r)
	if err := c.parseFlags(cmd, args, &queues, r); err != nil {
		return nil, err
	}
	c.parseLists(queues, allow, r)
	c.TrustedProxies = parseProxies(r.str("FLINT_TRUSTED_PROXIES", ""), r)
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
