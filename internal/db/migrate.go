package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// migrateLockKey serialises migrations across processes that start together.
const migrateLockKey = 0x666c696e74 // "flint"

const (
	migrateLockSQL   = `SELECT pg_advisory_lock($1)`
	migrateUnlockSQL = `SELECT pg_advisory_unlock($1)`
	// The ledger of applied migrations: one row per file, by the version
	// its name starts with (the table dbmate keeps, so databases migrated
	// by earlier releases carry on).
	migrationsTableSQL   = `CREATE TABLE IF NOT EXISTS schema_migrations (version varchar PRIMARY KEY)`
	appliedMigrationsSQL = `SELECT version FROM schema_migrations`
	recordMigrationSQL   = `INSERT INTO schema_migrations (version) VALUES ($1)`
	databaseExistsSQL    = `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`
)

// Migrate creates the database if it does not exist and applies every
// pending migration. Processes that start at once take turns on an advisory
// lock, so each migration runs exactly once.
//
// It connects with ParseConnConfig, the parser the store's pool uses, so a
// connection string the pool accepts (several hosts, target_session_attrs,
// connect_timeout, sslmode...) migrates too.
func Migrate(ctx context.Context, databaseURL string, logger *slog.Logger) error {
	return migrate(ctx, databaseURL, logger, true, MigrateOptions{})
}

// ErrNoDatabase means the database a command was pointed at does not
// exist (MigrateExisting).
var ErrNoDatabase = errors.New("database does not exist")

// MigrateExisting is Migrate for a database that must exist already: a
// missing one is ErrNoDatabase, not created. Commands that manage what is
// in Flint's database (flint users) use it, so that a wrong or missing
// DATABASE_URL is an error rather than a new, empty database.
func MigrateExisting(ctx context.Context, databaseURL string, logger *slog.Logger) error {
	return migrate(ctx, databaseURL, logger, false, MigrateOptions{})
}

// migration is one file of migrations/: what "-- migrate:up" holds.
type migration struct {
	version string // the digits the file name starts with
	name    string
	up      string
	noTx    bool // "-- migrate:up transaction:false"
	// breaksBefore is the version of its "-- flint:breaks-before" line:
	// processes older than that cannot live with it (migrate_breaks.go).
	breaksBefore string
}

var (
	migrationName = regexp.MustCompile(`^(\d+)_.*\.sql$`)
	upMarker      = regexp.MustCompile(`(?m)^--\s*migrate:up\b(.*)$`)
	downMarker    = regexp.MustCompile(`(?m)^--\s*migrate:down\b.*$`)
)

// loadMigrations reads every migration of FS, oldest first.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(FS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		b, err := fs.ReadFile(FS, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		text := string(b)
		loc := upMarker.FindStringSubmatchIndex(text)
		if loc == nil {
			return nil, fmt.Errorf("migration %s has no -- migrate:up block", e.Name())
		}
		if strings.TrimSpace(text[:loc[0]]) != "" {
			return nil, fmt.Errorf("migration %s has statements before -- migrate:up", e.Name())
		}
		up := text[loc[1]:]
		if d := downMarker.FindStringIndex(up); d != nil {
			up = up[:d[0]]
		}
		opts := strings.Fields(text[loc[2]:loc[3]])
		out = append(out, migration{
			version: m[1], name: e.Name(), up: up,
			noTx:         slices.Contains(opts, "transaction:false"),
			breaksBefore: breaksBefore(text),
		})
	}
	slices.SortFunc(out, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	return out, nil
}

func migrate(ctx context.Context, databaseURL string, logger *slog.Logger, create bool, opts MigrateOptions) error {
	// A migration may build an index for hours: no client-side deadline
	// on its statements (db/netfaults.go).
	ctx = WithStatementTimeout(ctx, 0)
	cfg, err := ParseConnConfig("DATABASE_URL", databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	migrations, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if isMissingDatabase(err) {
		if !create {
			return fmt.Errorf("%w: %q", ErrNoDatabase, cfg.Database)
		}
		if err := createDatabase(ctx, cfg, logger); err != nil {
			return err
		}
		conn, err = pgx.ConnectConfig(ctx, cfg)
	}
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, migrateLockSQL, int64(migrateLockKey)); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), migrateUnlockSQL, int64(migrateLockKey)) //nolint:errcheck // the connection closes anyway

	if _, err := conn.Exec(ctx, migrationsTableSQL); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, appliedMigrationsSQL)
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("migrate: read schema_migrations: %w", err)
	}
	pending := slices.DeleteFunc(migrations, func(m migration) bool { return slices.Contains(applied, m.version) })
	if err := checkPending(ctx, conn, pending, opts.Force, logger); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range pending {
		logger.InfoContext(ctx, "migration", "component", "migrate", "step", "Applying: "+m.name)
		if err := applyMigration(ctx, conn, m); err != nil {
			return fmt.Errorf("migrate: %s: %w", m.name, err)
		}
	}
	return nil
}

// applyMigration runs m and records it, in one transaction unless m asks
// for none.
func applyMigration(ctx context.Context, conn *pgx.Conn, m migration) error {
	if m.noTx {
		if _, err := conn.Exec(ctx, m.up); err != nil {
			return err
		}
		_, err := conn.Exec(ctx, recordMigrationSQL, m.version)
		return err
	}
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.up); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, recordMigrationSQL, m.version)
		return err
	})
}

// isMissingDatabase reports whether a connection failed because its
// database does not exist (SQLSTATE 3D000).
func isMissingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}

// createDatabase creates cfg's database through the server's maintenance
// database (postgres), with the same hosts and settings.
func createDatabase(ctx context.Context, cfg *pgx.ConnConfig, logger *slog.Logger) error {
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("migrate: connect to create database %q: %w", cfg.Database, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, databaseExistsSQL, cfg.Database).Scan(&exists); err != nil {
		return fmt.Errorf("migrate: check database exists: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database: another process won
		return fmt.Errorf("migrate: create database: %w", err)
	}
	logger.InfoContext(ctx, "created database", "database", cfg.Database)
	return nil
}
