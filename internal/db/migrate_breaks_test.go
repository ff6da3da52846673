package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

// TestMigrationBreaksRunningProcesses: a pending migration marked
// flint:breaks-before is refused while the registry holds a live Flint
// process of an older or unknown version, with a message naming each one
// (and none that is recent enough, gone, or a remote worker); forced, it
// goes ahead; with only recent processes live it is not refused.
func TestMigrationBreaksRunningProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbtest.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, `INSERT INTO workers (id, host, pid, concurrency, version, started_at, heartbeat_at, kind) VALUES
		('old-api', 'h1', 11, 0, 'v1.2.0', now(), now(), 'process'),
		('dev-worker', 'h2', 12, 4, 'dev', now(), now(), 'process'),
		('new-worker', 'h3', 13, 4, 'v1.4.1-3-gabc1234', now(), now(), 'process'),
		('gone-worker', 'h4', 14, 4, 'v1.0.0', now() - interval '10 minutes', now() - interval '10 minutes', 'process'),
		('python-worker', 'h5', 15, 4, '0.1.0', now(), now(), 'remote')`)
	require.NoError(t, err)

	const name = "20990101000001_drop_something.sql"
	text := "-- migrate:up\n-- flint:breaks-before v1.4.0\nALTER TABLE jobs DROP COLUMN something;\n"
	err = db.CheckBreaking(ctx, conn, name, text, false)
	require.True(t, errors.Is(err, db.ErrBreaksRunning), "%v", err)
	require.ErrorContains(t, err, "20990101000001_drop_something.sql needs every Flint process at v1.4.0 or later")
	require.ErrorContains(t, err, "old-api (host h1, pid 11, version v1.2.0)")
	require.ErrorContains(t, err, "dev-worker (host h2, pid 12, version dev)")
	require.ErrorContains(t, err, "flint migrate --force")
	for _, absent := range []string{"new-worker", "gone-worker", "python-worker"} {
		require.NotContains(t, err.Error(), absent)
	}
	require.NoError(t, db.CheckBreaking(ctx, conn, name, text, true), "forced")

	_, err = conn.Exec(ctx, `DELETE FROM workers WHERE id IN ('old-api', 'dev-worker')`)
	require.NoError(t, err)
	require.NoError(t, db.CheckBreaking(ctx, conn, name, text, false), "only recent processes run")
	_, err = conn.Exec(ctx, `UPDATE workers SET version = 'v1.3.9' WHERE id = 'new-worker'`)
	require.NoError(t, err)
	require.NoError(t, db.CheckBreaking(ctx, conn, "20990101000002_add_something.sql", "-- migrate:up\nSELECT 1;\n", false), "unmarked")
}

// TestSemverOrder: versions compare by their numbers; git describe's
// suffix is ignored; development builds do not parse.
func TestSemverOrder(t *testing.T) {
	t.Parallel()
	a, ok := db.ParseSemver("v1.9.3")
	require.True(t, ok)
	b, ok := db.ParseSemver("1.10.0-2-gdeadbee")
	require.True(t, ok)
	require.True(t, db.SemverLess(a, b))
	require.False(t, db.SemverLess(b, a))
	require.False(t, db.SemverLess(a, a))
	_, ok = db.ParseSemver("dev")
	require.False(t, ok)
	_, ok = db.ParseSemver("cd4163d-dirty")
	require.False(t, ok)
}
