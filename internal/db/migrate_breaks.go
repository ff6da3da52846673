package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rolling upgrades. Operators upgrade by running `flint migrate` of the
// new release while the old release's processes keep running, then
// replacing the processes one by one; so a migration must be one the old
// release can live with: expand only (add a table, a nullable column, an
// index built concurrently), contract a release later. A migration that
// cannot be (it drops or renames what older releases use) says so with a
// line in its file:
//
//	-- flint:breaks-before v1.4.0
//
// and migrating refuses to apply it while the worker registry holds a live
// Flint process whose version is older than v1.4.0, or whose version
// cannot be compared (a development build), naming each one, unless
// forced (`flint migrate --force`). Remote workers are left out: their
// version is their SDK's, and they reach the database only through the
// API.

// ErrBreaksRunning means a pending migration would break live processes
// of an older version; its message names them.
var ErrBreaksRunning = errors.New("a pending migration breaks processes that are still running")

// MigrateOptions changes how Migrate goes about it.
type MigrateOptions struct {
	// Force applies migrations marked flint:breaks-before even while
	// older processes run.
	Force bool
}

// MigrateWith is Migrate with opts.
func MigrateWith(ctx context.Context, databaseURL string, logger *slog.Logger, opts MigrateOptions) error {
	return migrate(ctx, databaseURL, logger, true, opts)
}

// checkPending refuses the pending migrations, before any is applied, when
// one of them would break live processes (checkBreaks), and logs the
// processes a forced one breaks.
func checkPending(ctx context.Context, conn *pgx.Conn, pending []migration, force bool, logger *slog.Logger) error {
	for _, m := range pending {
		old, err := checkBreaks(ctx, conn, m, force)
		if err != nil {
			return err
		}
		if len(old) > 0 {
			logger.WarnContext(ctx, "applying a migration older processes cannot live with, as forced", "component", "migrate",
				"migration", m.name, "breaks_before", m.breaksBefore, "processes", old)
		}
	}
	return nil
}

// breaksMarker is a migration's "-- flint:breaks-before <version>" line.
var breaksMarker = regexp.MustCompile(`(?m)^--\s*flint:breaks-before\s+(\S+)\s*$`)

// breaksBefore reads the version a migration's marker names, or "".
func breaksBefore(text string) string {
	if m := breaksMarker.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

// semver is a release version, vMAJOR.MINOR.PATCH.
type semver [3]int

var semverPattern = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`)

// parseSemver reads v1.2.3 (a leading v optional, anything after the
// patch, such as git describe's -4-gabc1234, ignored).
func parseSemver(s string) (semver, bool) {
	m := semverPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return semver{}, false
	}
	var v semver
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, true
}

func (a semver) less(b semver) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// liveProcessesSQL lists Flint's own processes that heartbeated lately;
// to_regclass keeps it working on a database that has no registry yet.
const liveProcessesSQL = `
SELECT id, host, pid, version FROM workers
WHERE kind = 'process' AND heartbeat_at > now() - $1 * interval '1 millisecond'
ORDER BY id`

// liveWindow is how recent a heartbeat must be for migrate to count the
// process as running: presence heartbeats every few seconds.
const liveWindow = time.Minute

// oldProcesses names the live processes a migration marked breaks-before
// `before` would break: older than it, or of a version that cannot be
// compared.
func oldProcesses(ctx context.Context, conn *pgx.Conn, before string) ([]string, error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('workers') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return nil, err
	}
	limit, ok := parseSemver(before)
	if !ok {
		return nil, fmt.Errorf("flint:breaks-before %q is not a version like v1.4.0", before)
	}
	rows, err := conn.Query(ctx, liveProcessesSQL, float64(liveWindow/time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("read the worker registry: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, host, version string
		var pid int
		if err := rows.Scan(&id, &host, &pid, &version); err != nil {
			return nil, err
		}
		if v, ok := parseSemver(version); ok && !v.less(limit) {
			continue
		}
		if version == "" {
			version = "unknown"
		}
		out = append(out, fmt.Sprintf("%s (host %s, pid %d, version %s)", id, host, pid, version))
	}
	return out, rows.Err()
}

// checkBreaks refuses m when it is marked breaks-before and older
// processes are live, unless forced.
func checkBreaks(ctx context.Context, conn *pgx.Conn, m migration, force bool) ([]string, error) {
	if m.breaksBefore == "" {
		return nil, nil
	}
	old, err := oldProcesses(ctx, conn, m.breaksBefore)
	if err != nil || len(old) == 0 {
		return old, err
	}
	if force {
		return old, nil
	}
	return old, fmt.Errorf("%w: %s needs every Flint process at %s or later, and these run an older or unknown version: %s; "+
		"replace them first, or run flint migrate --force to apply it anyway",
		ErrBreaksRunning, m.name, m.breaksBefore, strings.Join(old, ", "))
}
