package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
)

// TestDatabaseBehindPgBouncer: behind PgBouncer the store switches off
// named prepared statements, LISTEN and migrations take
// FLINT_DIRECT_DATABASE_URL, a process without one polls instead of
// listening, and a command that migrates refuses to start without one.
func TestDatabaseBehindPgBouncer(t *testing.T) {
	const (
		bouncer = "postgres://flint@pgbouncer:6432/flint"
		direct  = "postgres://flint@postgres:5432/flint"
	)
	load := func(cmd string, env map[string]string) (*Config, error) {
		return LoadConfig(cmd, nil, func(k string) string { return env[k] })
	}

	c, err := load("serve", map[string]string{"DATABASE_URL": direct})
	require.NoError(t, err)
	require.Equal(t, db.Config{URL: direct, MaxInterruptions: c.MaxInterruptions,
		EnqueueWindow: db.DefaultEnqueueWindow, EnqueueBatch: db.DefaultEnqueueBatch}, c.storeConfig())
	require.Equal(t, direct, c.directURL(), "without a pooler DATABASE_URL is direct")

	c, err = load("worker", map[string]string{"DATABASE_URL": bouncer, "FLINT_DATABASE_POOLER": "pgbouncer"})
	require.NoError(t, err)
	require.Equal(t, db.PoolerPgBouncer, c.storeConfig().Pooler)
	require.Empty(t, c.directURL(), "a worker behind PgBouncer without a direct URL polls")

	env := map[string]string{"DATABASE_URL": bouncer, "FLINT_DATABASE_POOLER": "pgbouncer", "FLINT_DIRECT_DATABASE_URL": direct}
	c, err = load("serve", env)
	require.NoError(t, err)
	require.Equal(t, bouncer, c.storeConfig().URL)
	require.Equal(t, direct, c.directURL())

	for _, cmd := range []string{"serve", "api", "migrate"} {
		_, err = load(cmd, map[string]string{"DATABASE_URL": bouncer, "FLINT_DATABASE_POOLER": "pgbouncer"})
		require.ErrorContains(t, err, "flint "+cmd+" applies migrations")
		require.ErrorContains(t, err, "FLINT_DIRECT_DATABASE_URL")
	}
	_, err = load("worker", map[string]string{"FLINT_DATABASE_POOLER": "pgpool", "FLINT_DIRECT_DATABASE_URL": "mysql://x"})
	require.ErrorContains(t, err, `FLINT_DATABASE_POOLER="pgpool"`)
	require.ErrorContains(t, err, `FLINT_DIRECT_DATABASE_URL: the scheme is "mysql", not postgres; want postgres://`)

	t.Setenv("DATABASE_URL", bouncer)
	t.Setenv("FLINT_DATABASE_POOLER", "pgbouncer")
	_, _, err = commandDatabase("flint users")
	require.ErrorContains(t, err, "flint users applies migrations")
	t.Setenv("FLINT_DIRECT_DATABASE_URL", direct)
	migrateURL, cfg, err := commandDatabase("flint users")
	require.NoError(t, err)
	require.Equal(t, direct, migrateURL)
	require.Equal(t, db.Config{URL: bouncer, Pooler: db.PoolerPgBouncer, EnqueueWindow: -1}, cfg, "one-off commands need no group commit")
}
