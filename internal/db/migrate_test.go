package db_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

// closedPort returns a local port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	require.NoError(t, l.Close())
	return port
}

// TestMigrateMultiHostURL migrates (creating the database) through a
// libpq multi-host connection string whose first host is down, as an HA
// pair's connection string is while one server is away: the migrator reads
// connection strings as the pool does.
func TestMigrateMultiHostURL(t *testing.T) {
	t.Parallel()
	admin, err := url.Parse(dbtest.AdminURL(t))
	require.NoError(t, err)
	name := fmt.Sprintf("flint_multihost_%d", time.Now().UnixNano())
	multi := *admin
	multi.Host = "127.0.0.1:" + closedPort(t) + "," + admin.Host
	multi.Path = "/" + name
	q := multi.Query()
	q.Set("target_session_attrs", "read-write")
	q.Set("connect_timeout", "5")
	multi.RawQuery = q.Encode()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), admin.String())
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = conn.Close(context.Background())
		}
	})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	err = db.MigrateExisting(ctx, multi.String(), logger)
	require.ErrorIs(t, err, db.ErrNoDatabase, "flint users must not create a database")

	require.NoError(t, db.Migrate(ctx, multi.String(), logger))
	require.NoError(t, db.Migrate(ctx, multi.String(), logger), "a second run applies nothing")
	require.NoError(t, db.MigrateExisting(ctx, multi.String(), logger))

	files, err := fs.Glob(db.FS, "migrations/*.sql")
	require.NoError(t, err)
	s, err := db.Open(ctx, db.Config{URL: multi.String()})
	require.NoError(t, err)
	defer s.Close()
	var applied int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied))
	require.Equal(t, len(files), applied)
	var jobsTable bool
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT to_regclass('jobs') IS NOT NULL`).Scan(&jobsTable))
	require.True(t, jobsTable)
}

// TestConnStringErrors: a malformed connection string is an error naming
// the problem, without the password, for every entry point.
func TestConnStringErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct{ url, want string }{
		{"postgres://u:s3cretpw@db1:5432,db2:5432,db3/flint?target_session_attrs=read-write&connect_timeout=2&port=1,2", "port"},
		{"postgres://u:s3cretpw@db1:5432/flint?target_session_attrs=sometimes", "target_session_attrs"},
		{"postgres://u:s3cretpw@db1:5432/flint?connect_timeout=soon", "connect_timeout"},
		{"postgres://u:s3cretpw@db1:notaport/flint", "port"},
		{"host=db1 password=s3cretpw sslmode=bogus", "sslmode"},
	} {
		for _, err := range []error{
			db.CheckConnString("DATABASE_URL", tc.url),
			db.Migrate(ctx, tc.url, logger),
			func() error { _, err := db.Open(ctx, db.Config{URL: tc.url}); return err }(),
		} {
			require.Error(t, err, tc.url)
			require.Contains(t, err.Error(), "DATABASE_URL")
			require.Contains(t, err.Error(), tc.want)
			require.NotContains(t, err.Error(), "s3cretpw")
			require.NotContains(t, strings.ToLower(err.Error()), "no such host")
		}
	}
	require.NoError(t, db.CheckConnString("DATABASE_URL", "postgres://u@db1:5432,db2:5432/flint?target_session_attrs=read-write"))
	require.NoError(t, db.CheckConnString("DATABASE_URL", "host=db1,db2 port=5432,5433 dbname=flint target_session_attrs=primary connect_timeout=3 sslmode=prefer"))
}
