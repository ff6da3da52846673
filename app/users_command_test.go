package app

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
)

// TestUsersCommand: add prints a generated password that signs in; disable
// ends the person's sessions; reset-password gives a locked-out admin a new
// password and ends their sessions; every change is on the audit trail.
func TestUsersCommand(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(sub, email string, role auth.Role, password string) (string, error) {
		var out bytes.Buffer
		err := runUsers(ctx, store, sub, email, role, password, &out)
		return out.String(), err
	}

	out, err := run("add", "ana@example.com", auth.RoleAdmin, "")
	require.NoError(t, err)
	require.Contains(t, out, "added ana@example.com as admin")
	generated := shownPassword(t, out)
	_, err = store.Authenticate(ctx, "ana@example.com", generated)
	require.NoError(t, err, "the printed password signs in")

	_, err = run("add", "bo@example.com", auth.RoleViewer, "bo-password-1")
	require.NoError(t, err)
	_, err = run("add", "BO@example.com", auth.RoleViewer, "bo-password-1")
	require.ErrorContains(t, err, "exists")

	bo, err := store.Authenticate(ctx, "bo@example.com", "bo-password-1")
	require.NoError(t, err)
	require.NoError(t, store.CreateSession(ctx, bo.ID, "bo-token", "csrf", time.Hour, "", "", ""))
	out, err = run("disable", "bo@example.com", "", "")
	require.NoError(t, err)
	require.Contains(t, out, "disabled")
	_, err = store.GetSession(ctx, "bo-token")
	require.ErrorIs(t, err, domain.ErrNotFound, "disabling ends the session")
	_, err = store.Authenticate(ctx, "bo@example.com", "bo-password-1")
	require.ErrorIs(t, err, auth.ErrDisabled)

	out, err = run("list", "", "", "")
	require.NoError(t, err)
	require.Regexp(t, `ana@example.com\s+admin\s+active`, out)
	require.Regexp(t, `bo@example.com\s+viewer\s+disabled`, out)

	// The only admin cannot be disabled.
	_, err = run("disable", "ana@example.com", "", "")
	require.ErrorContains(t, err, "last enabled admin")

	ana, err := store.UserByEmail(ctx, "ana@example.com")
	require.NoError(t, err)
	require.NoError(t, store.CreateSession(ctx, ana.ID, "ana-token", "csrf", time.Hour, "", "", ""))
	out, err = run("reset-password", "ana@example.com", "", "")
	require.NoError(t, err)
	fresh := shownPassword(t, out)
	_, err = store.Authenticate(ctx, "ana@example.com", fresh)
	require.NoError(t, err)
	_, err = store.Authenticate(ctx, "ana@example.com", generated)
	require.ErrorIs(t, err, auth.ErrBadLogin)
	_, err = store.GetSession(ctx, "ana-token")
	require.ErrorIs(t, err, domain.ErrNotFound)

	_, err = run("disable", "nobody@example.com", "", "")
	require.ErrorIs(t, err, domain.ErrNotFound)

	// Roles from the shell; the last admin stays an admin.
	_, err = run("set-role", "ana@example.com", auth.RoleViewer, "")
	require.ErrorContains(t, err, "last enabled admin")
	_, err = run("enable", "bo@example.com", "", "")
	require.NoError(t, err)
	out, err = run("set-role", "bo@example.com", auth.RoleAdmin, "")
	require.NoError(t, err)
	require.Contains(t, out, "role is now admin")
	_, err = run("remove", "ana@example.com", "", "")
	require.NoError(t, err)
	_, err = store.UserByEmail(ctx, "ana@example.com")
	require.ErrorIs(t, err, domain.ErrNotFound)

	requireCLIAudit(t, ctx, store, "user_add", "user_add", "user_disable", "password_reset", "user_enable", "user_role", "user_remove")
}

// shownPassword returns the password a users subcommand printed.
func shownPassword(t *testing.T, out string) string {
	t.Helper()
	_, pw, ok := strings.Cut(strings.TrimSpace(out), "password (shown once): ")
	require.True(t, ok, out)
	return pw
}

// requireCLIAudit requires the audit trail to hold exactly the actions
// want, each from the command line.
func requireCLIAudit(t *testing.T, ctx context.Context, store *db.Store, want ...string) {
	t.Helper()
	entries, err := store.ListAudit(ctx, domain.AuditQuery{Limit: 50})
	require.NoError(t, err)
	var actions []string
	for _, e := range entries {
		require.Equal(t, "cli", e.Source)
		require.True(t, strings.HasPrefix(e.Actor, "cli:"), e.Actor)
		actions = append(actions, e.Action)
	}
	require.ElementsMatch(t, want, actions)
}

// TestUsersCommandNeedsItsDatabase: without DATABASE_URL, or with one
// naming a database that does not exist, flint users says so and creates
// nothing, instead of making (and migrating) a new, empty database.
func TestUsersCommandNeedsItsDatabase(t *testing.T) {
	// Were the check to go, the command must still not reach a real
	// server here: migrations go over this unreachable direct URL.
	t.Setenv("FLINT_DIRECT_DATABASE_URL", "postgres://nobody@127.0.0.1:1/nowhere?sslmode=disable&connect_timeout=1")
	t.Setenv("DATABASE_URL", "")
	var out, errOut bytes.Buffer
	code := usersCommand([]string{"list"}, &out, &errOut)
	require.Equal(t, 2, code, errOut.String())
	require.Contains(t, errOut.String(), "DATABASE_URL is not set")
	require.Empty(t, out.String())

	admin := dbtest.AdminURL(t)
	u, err := url.Parse(admin)
	require.NoError(t, err)
	name := "flint_missing_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	u.Path = "/" + name
	t.Setenv("FLINT_DIRECT_DATABASE_URL", "")
	t.Setenv("DATABASE_URL", u.String())
	errOut.Reset()
	code = usersCommand([]string{"add", "--email", "ana@example.com", "--role", "admin"}, &out, &errOut)
	require.Equal(t, 2, code, errOut.String())
	require.Contains(t, errOut.String(), `database does not exist: "`+name+`"`)
	require.Contains(t, errOut.String(), "DATABASE_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	require.False(t, exists, "no database was created")
}

// TestShellUser: the audit trail names who ran flint users even when the
// environment says nothing ($USER and $LOGNAME unset, as in a container).
func TestShellUser(t *testing.T) {
	t.Parallel()
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	ana := func() (*user.User, error) { return &user.User{Username: "ana"}, nil }
	nobody := func() (*user.User, error) { return nil, user.UnknownUserIdError(1234) }
	uid := func() int { return 1234 }
	host := func() (string, error) { return "build-7", nil }
	noHost := func() (string, error) { return "", errors.New("no hostname") }

	require.Equal(t, "bo", shellUser(env(map[string]string{"USER": "bo", "LOGNAME": "x"}), ana, uid, host))
	require.Equal(t, "x", shellUser(env(map[string]string{"LOGNAME": "x"}), ana, uid, host))
	require.Equal(t, "ana", shellUser(env(nil), ana, uid, host), "the account the process runs as")
	require.Equal(t, "uid 1234@build-7", shellUser(env(nil), nobody, uid, host), "no account name: its id and the host")
	require.Equal(t, "uid 1234", shellUser(env(nil), nobody, uid, noHost))
	require.NotContains(t, shellUser(os.Getenv, user.Current, os.Getuid, os.Hostname), "unknown")
}

// TestUsersCommandAuditWithoutUserVariables: with $USER and $LOGNAME unset
// the audit entry still names the account that ran the command.
func TestUsersCommandAuditWithoutUserVariables(t *testing.T) {
	t.Setenv("USER", "")
	t.Setenv("LOGNAME", "")
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, runUsers(ctx, store, "add", "cy@example.com", auth.RoleViewer, "cy-password-1", &out))
	entries, err := store.ListAudit(ctx, domain.AuditQuery{Limit: 1})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "cli:"+shellUser(os.Getenv, user.Current, os.Getuid, os.Hostname), entries[0].Actor)
	require.NotEqual(t, "cli:unknown", entries[0].Actor)
	require.NotEqual(t, "cli:", entries[0].Actor)
}

// TestUsersCommandMultiHostURL: flint users reads DATABASE_URL as the
// processes do, so an HA pair's multi-host string whose first server is
// down works, migrations included.
func TestUsersCommandMultiHostURL(t *testing.T) {
	u, err := url.Parse(dbtest.NewDatabase(t))
	require.NoError(t, err)
	dead := "127.0.0.1:1"
	u.Host = dead + "," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	q.Set("connect_timeout", "3")
	u.RawQuery = q.Encode()
	t.Setenv("FLINT_DIRECT_DATABASE_URL", "")
	t.Setenv("FLINT_DATABASE_POOLER", "")
	t.Setenv("DATABASE_URL", u.String())
	var out, errOut bytes.Buffer
	code := usersCommand([]string{"add", "--email", "ha@example.com", "--role", "viewer", "--password", "ha-password-1"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	out.Reset()
	code = usersCommand([]string{"list"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Contains(t, out.String(), "ha@example.com")
}
