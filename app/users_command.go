package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

const usersUsage = `Usage: flint users <command> [flags]

Manage the people who sign in to the dashboard, in Flint's database at
DATABASE_URL (which must be set, and exist; it is migrated first).

Commands:
  add             --email E --role viewer|operator|admin [--password P]
                  adds a person; without --password one is generated and printed
  list            every person with their role and state
  disable         --email E: no more sign-ins; their open sessions end at once
  enable          --email E: may sign in again
  set-role        --email E --role viewer|operator|admin: applies on their next request
  remove          --email E: deletes the person (the audit trail keeps their email)
  reset-password  --email E [--password P]: sets a new password (generated and
                  printed without --password), ends their sessions and lifts
                  the slow-down of their account's failed sign-ins; for an
                  admin who cannot get in
`

// usersCommand is `flint users …`; it returns the exit code.
func usersCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usersUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("flint users "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	email := fs.String("email", "", "the person's email")
	role := fs.String("role", "", "viewer, operator or admin")
	password := fs.String("password", "", "the password (8 to 72 characters); generated when empty")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "flint users %s: unexpected argument %q\n", sub, fs.Arg(0))
		return 2
	}
	if !usersArgsOK(sub, *email, *role, stderr) {
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	store, err := openForCommand(ctx)
	if errors.Is(err, errNoDatabaseURL) || errors.Is(err, db.ErrNoDatabase) {
		fmt.Fprintln(stderr, "flint users:", err)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "flint users:", err)
		return 1
	}
	defer store.Close()
	if err := runUsers(ctx, store, sub, *email, auth.Role(*role), *password, stdout); err != nil {
		var ve *jobs.ValidationError
		fmt.Fprintf(stderr, "flint users %s: %s\n", sub, strings.TrimSuffix(err.Error(), ": "+domain.ErrNotFound.Error()))
		if errors.As(err, &ve) || errors.Is(err, domain.ErrNotFound) {
			return 2
		}
		return 1
	}
	return 0
}

// usersArgsOK reports whether sub is a users command given the flags it
// needs; when it is not, it says why on stderr.
func usersArgsOK(sub, email, role string, stderr io.Writer) bool {
	needEmail := func() bool {
		if email == "" {
			fmt.Fprintf(stderr, "flint users %s: --email: give the person's email\n", sub)
			return false
		}
		return true
	}
	switch sub {
	case "add", "set-role":
		if !needEmail() {
			return false
		}
		if !auth.Role(role).Valid() {
			fmt.Fprintf(stderr, "flint users %s: --role: use viewer, operator or admin\n", sub)
			return false
		}
	case "disable", "enable", "reset-password", "remove":
		return needEmail()
	case "list":
	default:
		fmt.Fprintf(stderr, "flint users: unknown command %q\n\n%s", sub, usersUsage)
		return false
	}
	return true
}

// errNoDatabaseURL refuses to guess which database holds the people.
var errNoDatabaseURL = errors.New("DATABASE_URL is not set: set it to the database Flint serves from " +
	"(for the one make run serves, eval \"$(make -s env)\" sets it)")

// openForCommand migrates and opens Flint's database at DATABASE_URL (see
// commandDatabase for a pooler in front). Unlike the servers, it has no
// default and creates no database: the people it manages live in the
// database Flint serves from, and a new, empty one would only hide the
// mistake.
func openForCommand(ctx context.Context) (*db.Store, error) {
	if os.Getenv("DATABASE_URL") == "" {
		return nil, errNoDatabaseURL
	}
	migrateURL, dbConfig, err := commandDatabase("flint users")
	if err != nil {
		return nil, err
	}
	err = db.MigrateExisting(ctx, migrateURL, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if errors.Is(err, db.ErrNoDatabase) {
		return nil, fmt.Errorf("%w; point DATABASE_URL at the database Flint serves from (flint serve or flint migrate creates it)", err)
	}
	if err != nil {
		return nil, err
	}
	return db.Open(ctx, dbConfig)
}

// runUsers carries out one users command against store.
func runUsers(ctx context.Context, store *db.Store, sub, email string, role auth.Role, password string, out io.Writer) error {
	generated := password == ""
	if generated {
		password = auth.NewPassword()
	}
	switch sub {
	case "add":
		u, err := store.AddUser(ctx, email, password, role)
		if err != nil {
			return err
		}
		if err := recordCLI(ctx, store, "user_add", map[string]any{"email": u.Email, "role": u.Role}); err != nil {
			return err
		}
		fmt.Fprintf(out, "added %s as %s\n", u.Email, u.Role)
	case "list":
		users, err := store.ListUsers(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EMAIL\tROLE\tSTATE\tLAST SIGN-IN")
		for _, u := range users {
			state, last := "active", "never"
			if u.DisabledAt != nil {
				state = "disabled"
			}
			if u.LastLoginAt != nil {
				last = u.LastLoginAt.UTC().Format("2006-01-02 15:04 UTC")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Email, u.Role, state, last)
		}
		return tw.Flush()
	case "disable", "enable", "reset-password", "set-role", "remove":
		u, err := store.UserByEmail(ctx, email)
		if err != nil {
			return err
		}
		details := map[string]any{"email": u.Email}
		switch sub {
		case "disable":
			u, err = store.DisableUser(ctx, u.ID)
		case "enable":
			u, err = store.EnableUser(ctx, u.ID)
		case "set-role":
			u, err = store.SetUserRole(ctx, u.ID, role)
			details["role"] = role
		case "remove":
			u, err = store.RemoveUser(ctx, u.ID)
		default:
			u, err = store.SetPassword(ctx, u.ID, password, "")
		}
		if err != nil {
			return err
		}
		action := map[string]string{"disable": "user_disable", "enable": "user_enable", "reset-password": "password_reset",
			"set-role": "user_role", "remove": "user_remove"}[sub]
		if err := recordCLI(ctx, store, action, details); err != nil {
			return err
		}
		done := map[string]string{"disable": "disabled (sessions ended)", "enable": "enabled", "reset-password": "password set (sessions ended)",
			"set-role": "role is now " + string(u.Role), "remove": "removed"}[sub]
		fmt.Fprintf(out, "%s: %s\n", done, u.Email)
	}
	if generated && (sub == "add" || sub == "reset-password") {
		fmt.Fprintf(out, "password (shown once): %s\n", password)
	}
	return nil
}

// recordCLI puts a change made from a shell on the audit trail, naming the
// operating-system user who ran it.
func recordCLI(ctx context.Context, store *db.Store, action string, details map[string]any) error {
	b, _ := json.Marshal(details)
	actor := "cli:" + shellUser(os.Getenv, user.Current, os.Getuid, os.Hostname)
	return store.RecordAudit(ctx, domain.AuditEntry{Actor: actor, Source: "cli", Action: action, Details: b})
}

// shellUser names who runs the command: $USER or $LOGNAME, else the
// account the process runs as (a container or a cron job often sets
// neither variable), else its user id on this host.
func shellUser(getenv func(string) string, current func() (*user.User, error), uid func() int, hostname func() (string, error)) string {
	if who := cmp.Or(getenv("USER"), getenv("LOGNAME")); who != "" {
		return who
	}
	if u, err := current(); err == nil && u.Username != "" {
		return u.Username
	}
	who := "uid " + strconv.Itoa(uid())
	if host, err := hostname(); err == nil && host != "" {
		who += "@" + host
	}
	return who
}
