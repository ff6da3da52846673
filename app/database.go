package app

import (
	"cmp"
	"errors"
	"os"
	"strings"

	"github.com/flinthq/flint/internal/db"
)

// Flint makes three kinds of connection to PostgreSQL: the store's pool
// (every query and transaction), the listener's one LISTEN session, and
// the migrator's session, which holds an advisory lock while migrations run.
// The pool may go through PgBouncer in transaction-pooling mode
// (FLINT_DATABASE_POOLER=pgbouncer); the other two keep server-side
// session state, so they take FLINT_DIRECT_DATABASE_URL, a connection
// straight to PostgreSQL. Without a direct URL behind a pooler, the
// process runs without LISTEN (it polls) and cannot migrate.

// poolerNone and poolerPgBouncer are the values of FLINT_DATABASE_POOLER.
const (
	poolerNone      = "none"
	poolerPgBouncer = db.PoolerPgBouncer
)

// storeConfig is the store's pool as the settings describe it.
func (c *Config) storeConfig() db.Config {
	cfg := db.Config{URL: c.DatabaseURL, MaxInterruptions: c.MaxInterruptions,
		EnqueueWindow: c.EnqueueWindow, EnqueueBatch: c.EnqueueBatch}
	if c.EnqueueWindow == 0 {
		cfg.EnqueueWindow = -1 // off
	}
	if c.DatabasePooler == poolerPgBouncer {
		cfg.Pooler = db.PoolerPgBouncer
	}
	return cfg
}

// directURL is a connection straight to PostgreSQL, or "" if there is none:
// FLINT_DIRECT_DATABASE_URL, else DATABASE_URL when no pooler is in front.
func (c *Config) directURL() string {
	if c.DirectDatabaseURL != "" {
		return c.DirectDatabaseURL
	}
	if c.DatabasePooler == poolerPgBouncer {
		return ""
	}
	return c.DatabaseURL
}

// validateDatabase checks the pooler settings of cmd, which applies
// migrations if migrates.
func (c *Config) validateDatabase(cmd string, migrates bool, r *configReader) {
	switch c.DatabasePooler {
	case poolerNone, poolerPgBouncer:
	default:
		r.bad("FLINT_DATABASE_POOLER=%q: want none or pgbouncer", c.DatabasePooler)
	}
	if c.DirectDatabaseURL != "" {
		if err := db.CheckConnString("FLINT_DIRECT_DATABASE_URL", c.DirectDatabaseURL); err != nil {
			r.bad("%s; it must lead straight to PostgreSQL", err)
		}
	}
	if migrates && c.directURL() == "" {
		r.bad("%s applies migrations, which hold a session-level advisory lock that PgBouncer's transaction pooling "+
			"cannot keep: set FLINT_DIRECT_DATABASE_URL to a connection straight to PostgreSQL", cmd)
	}
}

// commandDatabase reads, for the commands cmd outside the process roles
// (users, bench history), which migrate first, the URL to migrate through and the store's settings.
func commandDatabase(cmd string) (migrateURL string, cfg db.Config, err error) {
	c := &Config{
		DatabaseURL:       cmp.Or(os.Getenv("DATABASE_URL"), defaultDatabaseURL),
		DirectDatabaseURL: os.Getenv("FLINT_DIRECT_DATABASE_URL"),
		DatabasePooler:    cmp.Or(os.Getenv("FLINT_DATABASE_POOLER"), poolerNone),
	}
	r := &configReader{}
	c.validateDatabase(cmd, true, r)
	if len(r.problems) > 0 {
		return "", db.Config{}, errors.New(strings.Join(r.problems, "; "))
	}
	return c.directURL(), c.storeConfig(), nil
}
