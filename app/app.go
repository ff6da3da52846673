package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// DefaultVersion is the version an App reports when none is set.
const DefaultVersion = "dev"

const usage = `Flint: background jobs on PostgreSQL.

Usage: flint <command> [flags]

Commands:
  serve       API, dashboard, workers and scheduler in one process (default)
  api         the HTTP API and dashboard only
  worker      a worker pool only
  scheduler   the scheduling and maintenance loops only (promoter, reaper,
              recurring series, aging, retention, archive, alerts, vacuum)
  migrate     apply database migrations and exit (--force: even one that
              older running processes cannot live with; see docs/faults.md)
  bench       run the scheduler benchmark (heap vs timing wheel);
              "bench history -jobs N" fills DATABASE_URL with N finished jobs
  users       add, list, disable, enable and remove dashboard users, set roles,
              reset a password
              ("flint users help" for the details)
  secret      print a new random secret (256 bits) for FLINT_API_KEY,
              FLINT_SESSION_KEY or FLINT_ADMIN_PASSWORD
  healthcheck probe this machine's flint on FLINT_ADDR (for container health checks)
  version     print the version

Configuration comes from the environment (see README.md); run
"flint <command> -h" for the flags of a command.
`

// App is a Flint program: the stock binary's commands, settings and
// roles, running the built-in job types and the handlers registered with
// Handle. The zero value is not ready; use New.
//
// Register every handler before calling Main or Run; an App is then safe
// for use by several goroutines (a program may Run several roles at once,
// each with its own Config).
type App struct {
	// Version is what "flint version" prints, what workers report in the
	// registry and what /metrics carries; empty means DefaultVersion.
	Version string

	handlers map[string]jobs.Handler
	order    []string
}

// New returns an App that runs the built-in job types (http_request,
// send_email, noop, sleep, fail) and no others until Handle adds them.
func New() *App { return &App{handlers: map[string]jobs.Handler{}} }

// Handle registers h for jobs of jobType in every process this App runs:
// worker pools run them, and the API accepts them (validating the payload
// at enqueue when h implements jobs.PayloadValidator, as jobs.Typed
// handlers do). It panics if jobType is not a valid type name, is a
// built-in type, or is registered twice: mistakes a program makes at
// start-up, not at run time.
func (a *App) Handle(jobType string, h jobs.Handler) {
	if h == nil {
		panic(fmt.Sprintf("app: nil handler for job type %q", jobType))
	}
	if domain.IsBuiltin(jobType) {
		panic(fmt.Sprintf("app: job type %q is built in; choose another name", jobType))
	}
	if _, dup := a.handlers[jobType]; dup {
		panic(fmt.Sprintf("app: job type %q registered twice", jobType))
	}
	jobs.NewRegistry().Register(jobType, h) // panics on an invalid name, with the rules
	a.handlers[jobType] = h
	a.order = append(a.order, jobType)
}

// Types returns the job types registered with Handle, in order.
func (a *App) Types() []string { return append([]string(nil), a.order...) }

// registry returns a registry with the built-in types (given their
// dependencies) and every handler registered with Handle.
func (a *App) registry(deps domain.BuiltinDeps) *jobs.Registry {
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, deps)
	for _, t := range a.order {
		reg.Register(t, a.handlers[t])
	}
	return reg
}

func (a *App) version() string {
	if a.Version == "" {
		return DefaultVersion
	}
	return a.Version
}

// Main runs the command that args name (os.Args[1:] in a program's main:
// serve by default, api, worker, scheduler, migrate, bench, users,
// healthcheck, version, help) with the settings of the environment and
// the command's flags, exactly as the stock flint binary does, until the
// command ends or the process gets SIGINT or SIGTERM. It returns the
// exit code:
//
//	func main() {
//		a := app.New()
//		a.Handle("resize_image", jobs.Typed(resize))
//		os.Exit(a.Main(os.Args[1:]))
//	}
func (a *App) Main(args []string) int {
	return a.main(args, os.Stdout, os.Stderr)
}

func (a *App) main(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	args = append([]string(nil), args...)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		args[0] = "help"
	}
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve", "api", "worker", "scheduler", "migrate":
	case "version":
		fmt.Fprintln(stdout, "flint", a.version())
		return 0
	case "healthcheck":
		return healthcheck(os.Getenv("FLINT_ADDR"))
	case "bench":
		return benchCommand(args)
	case "users":
		return usersCommand(args, stdout, stderr)
	case "secret":
		if len(args) > 0 {
			fmt.Fprintf(stderr, "flint secret: it takes no arguments\n")
			return 2
		}
		fmt.Fprintln(stdout, auth.NewSecret())
		return 0
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "flint: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	cfg, err := LoadConfig(cmd, args, nil)
	if errors.Is(err, flag.ErrHelp) {
		return 0 // the flag package printed the command's flags
	}
	if err != nil {
		fmt.Fprintln(stderr, "flint:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx, cfg); err != nil {
		if errors.Is(err, errLogging) {
			fmt.Fprintln(stderr, "flint:", err)
			return 2
		}
		return 1 // Run logged it
	}
	return 0
}

// defaultGCPercent is the garbage collector's target (GOGC) of the
// program's commands when the environment sets none. A Flint process keeps
// little alive (tens of megabytes) and makes garbage fast (a batch request
// decodes, writes and answers a thousand jobs): at Go's default of 100 the
// collector and the scavenger returning its memory took about a quarter of
// the API's CPU in a batch enqueue. At 200 the API spends a fifth less CPU
// per job there (4.4-4.8 against 5.6-6.5 µs) and holds 64 MB instead of 50.
// GOGC, when set, wins; a program running the roles itself (Run) keeps its
// own setting.
const defaultGCPercent = 200

// errLogging marks a Run that could not set up its logging (so could not
// log why it stopped).
var errLogging = errors.New("logging")

// Run runs the roles of cfg.Command (serve: API, dashboard, workers and
// scheduler; api; worker; scheduler; migrate: apply migrations and
// return) in this process until ctx is done or a component fails, then
// shuts down in order: HTTP first, running jobs drained within the drain
// timeout, the rest handed back to the queue. It returns nil on a clean
// stop. It is the entry point for a program that has its own main and
// context; LoadConfig makes cfg from the environment.
//
// Run logs to stdout (and FLINT_LOG_FILE) as cfg says, and ships its log
// entries to the database for the dashboard's Logs page; an error that
// stops it is logged before it returns.
func (a *App) Run(ctx context.Context, cfg *Config) error {
	if cfg == nil {
		return errors.New("app: Run needs a Config (LoadConfig makes one)")
	}
	lg, err := logs.New(logs.Config{Level: cfg.LogLevel, Format: cfg.LogFormat, File: cfg.LogFile})
	if err != nil {
		return fmt.Errorf("%w: %v", errLogging, err)
	}
	defer lg.Close()
	return a.run(ctx, rolesOf(cfg.Command), cfg, lg)
}

// announce prints how to reach the server, with the generated API key when
// there is one, so a developer can start at once.
func announce(cfg *Config, addr string, adminCreated bool, logger *slog.Logger) {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	base := "http://" + net.JoinHostPort(host, port)
	logger.Info("listening", "url", base)
	if cfg.APIKeyGenerated {
		fmt.Fprintf(os.Stderr, "\n  API key (generated for this run; set FLINT_API_KEY to keep one): %s\n", cfg.APIKey)
	}
	if adminCreated && cfg.AdminPasswordGenerated {
		fmt.Fprintf(os.Stderr, "  Dashboard login (generated; set FLINT_ADMIN_PASSWORD to choose one): %s / %s\n", cfg.AdminEmail, cfg.AdminPassword)
	}
	if cfg.SessionKeyGenerated {
		fmt.Fprintf(os.Stderr, "  Sessions end when Flint restarts (FLINT_SESSION_KEY is not set).\n")
	}
	if cfg.APIKeyGenerated || cfg.AdminPasswordGenerated {
		fmt.Fprintf(os.Stderr, `
  Flint is running at %[1]s
  Enqueue a first job:
    curl -s -X POST %[1]s/api/v1/jobs -H 'X-API-Key: %[2]s' \
         -H 'Content-Type: application/json' -d '{"type":"noop"}'

`, base, cfg.APIKey)
	}
}
