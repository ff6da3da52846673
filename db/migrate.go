package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"

	"github.com/amacneil/dbmate/v2/pkg/dbmate"
	_ "github.com/amacneil/dbmate/v2/pkg/driver/postgres" // dbmate's postgres driver
	"github.com/jackc/pgx/v5"
)

// migrateLockKey serialises migrations across processes that start together.
const migrateLockKey = 0x666c696e74 // "flint"

const (
	migrateLockSQL   = `SELECT pg_advisory_lock($1)`
	migrateUnlockSQL = `SELECT pg_advisory_unlock($1)`
)

// Migrate creates the database if it does not exist and applies every
// pending migration. Processes that start at once take turns on an advisory
// lock, so each migration runs exactly once.
func Migrate(ctx context.Context, databaseURL string, logger *slog.Logger) error {
	return migrate(ctx, databaseURL, logger, true)
}

// ErrNoDatabase means the database a command was pointed at does not
// exist (MigrateExisting).
var ErrNoDatabase = errors.New("database does not exist")

// MigrateExisting is Migrate for a database that must exist already: a
// missing one is ErrNoDatabase, not created. Commands that manage what is
// in Flint's database (flint users) use it, so that a wrong or missing
// DATABASE_URL is an error rather than a new, empty database.
func MigrateExisting(ctx context.Context, databaseURL string, logger *slog.Logger) error {
	return migrate(ctx, databaseURL, logger, false)
}

func migrate(ctx context.Context, databaseURL string, logger *slog.Logger, create bool) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: parse DATABASE_URL: %w", err)
	}
	mig := dbmate.New(u)
	mig.FS = FS
	mig.MigrationsDir = []string{"migrations"}
	mig.AutoDumpSchema = false
	mig.Log = logWriter(logger)

	drv, err := mig.Driver()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	exists, err := drv.DatabaseExists()
	if err != nil {
		return fmt.Errorf("migrate: check database exists: %w", err)
	}
	if !exists && !create {
		return fmt.Errorf("%w: %q", ErrNoDatabase, strings.TrimPrefix(u.Path, "/"))
	}
	if !exists {
		if err := drv.CreateDatabase(); err != nil && !strings.Contains(err.Error(), "already exists") {
			return fmt.Errorf("migrate: create database: %w", err)
		}
		logger.InfoContext(ctx, "created database", "database", strings.TrimPrefix(u.Path, "/"))
	}

	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, migrateLockSQL, int64(migrateLockKey)); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), migrateUnlockSQL, int64(migrateLockKey)) //nolint:errcheck // the connection closes anyway

	if err := mig.Migrate(); err != nil && !errors.Is(err, dbmate.ErrNoMigrationFiles) {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// logWriter turns dbmate's progress lines into log entries.
func logWriter(logger *slog.Logger) io.Writer { return lineLogger{logger} }

type lineLogger struct{ logger *slog.Logger }

func (l lineLogger) Write(p []byte) (int, error) {
	for _, line := range strings.Split(string(p), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			l.logger.Info("migration", "component", "migrate", "step", line)
		}
	}
	return len(p), nil
}
