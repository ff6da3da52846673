// Command flint is the Flint job system: one binary that runs the API and
// dashboard, the worker pool and the scheduler loops, together (serve) or
// one role per process (api, worker, scheduler).
//
// Start reading here, then jobs/doc.go for the state machine and
// ARCHITECTURE.md for the map.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"flint/logs"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `Flint: background jobs on PostgreSQL.

Usage: flint <command> [flags]

Commands:
  serve       API, dashboard, workers and scheduler in one process (default)
  api         the HTTP API and dashboard only
  worker      a worker pool only
  scheduler   the scheduling and maintenance loops only (promoter, reaper,
              recurring series, aging, retention, DLQ alerts)
  migrate     apply database migrations and exit
  bench       run the scheduler benchmark (heap vs timing wheel);
              "bench history -jobs N" fills DATABASE_URL with N finished jobs
  users       add, list, disable, enable and remove dashboard users, set roles,
              reset a password
              ("flint users help" for the details)
  healthcheck probe this machine's flint on FLINT_ADDR (for container health checks)
  version     print the version

Configuration comes from the environment (see README.md); run
"flint <command> -h" for the flags of a command.
`

func main() {
	cmd := "serve"
	args := os.Args[1:]
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		args[0] = "help"
	}
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve", "api", "worker", "scheduler", "migrate":
	case "version":
		fmt.Println("flint", version)
		return
	case "healthcheck":
		os.Exit(healthcheck(os.Getenv("FLINT_ADDR")))
	case "bench":
		os.Exit(benchCommand(args))
	case "users":
		os.Exit(usersCommand(args, os.Stdout, os.Stderr))
	case "help", "-h", "--help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "flint: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	cfg, err := loadConfig(cmd, args, nil)
	if errors.Is(err, flag.ErrHelp) {
		return // the flag package printed the command's flags
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint:", err)
		os.Exit(2)
	}
	lg, err := logs.New(logs.Config{Level: cfg.LogLevel, Format: cfg.LogFormat, File: cfg.LogFile})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flint: logging:", err)
		os.Exit(2)
	}
	defer lg.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, rolesOf(cmd), cfg, lg); err != nil { // run logged it
		_ = lg.Close()
		os.Exit(1)
	}
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
