// Package dbtest gives each test its own PostgreSQL database, cloned from a
// template that is migrated once per schema version, and its own Redis key
// prefix. Tests run against real servers: TEST_DATABASE_URL (a database
// the test user can CREATE DATABASE from, typically .../postgres) and
// TEST_REDIS_URL. When a variable is unset the test fails, unless run with
// -short, when it is skipped.
//
// Import it from _test.go files only.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/db"
)

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// AdminURL returns TEST_DATABASE_URL, failing (or, with -short, skipping)
// the test when it is unset.
func AdminURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		if testing.Short() {
			t.Skip("TEST_DATABASE_URL is unset; skipping database test in -short mode")
		}
		t.Fatal("TEST_DATABASE_URL is unset: point it at a PostgreSQL server (make test does)")
	}
	return u
}

// NewDatabase creates a fresh, migrated database for the test, dropped when
// the test ends, and returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(admin) })
	if templateErr != nil {
		t.Fatalf("prepare template database: %v", templateErr)
	}
	name := "flint_test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", redact(admin), err)
	}
	defer conn.Close(ctx)
	// Cloning fails while another session is connected to the template, so
	// retry briefly when tests start together.
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, name, templateName))
		if err == nil || attempt == 50 || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop test database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, name)); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

// NewStore returns a Store on a fresh database (see NewDatabase), closed
// when the test ends, together with the database URL.
func NewStore(t testing.TB) (*db.Store, string) {
	t.Helper()
	u := NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := db.Open(ctx, db.Config{URL: u, MaxConns: 20})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(s.Close)
	return s, u
}

// PendingOccurrences counts the occurrences of the recurring series that
// wait for their time (scheduled, never run): one, while the series is
// whole.
func PendingOccurrences(t testing.TB, s *db.Store, series uuid.UUID) int {
	t.Helper()
	var n int
	err := s.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM jobs WHERE schedule_id = $1 AND status = 'scheduled' AND executions = 0`, series).Scan(&n)
	if err != nil {
		t.Fatalf("count pending occurrences: %v", err)
	}
	return n
}

// ensureTemplate creates (once per schema version, shared by every test
// binary) a migrated database to clone.
func ensureTemplate(admin string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(db.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(db.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	name := "flint_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(admin), err)
	}
	defer conn.Close(ctx)
	// Test binaries of several packages start at once: serialise.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7283946)`); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, `SELECT pg_advisory_unlock(7283946)`) //nolint:errcheck
	var ready bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, name).Scan(&ready)
	if err != nil || ready {
		return name, err
	}
	build := name + "_build"
	_, _ = conn.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, build))
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, build)); err != nil {
		return "", err
	}
	logger := slog.New(slog.NewTextHandler(discard{}, nil))
	if err := db.Migrate(ctx, withDatabase(admin, build), logger); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s RENAME TO %s`, build, name)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s WITH is_template true`, name)); err != nil {
		return "", err
	}
	return name, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the database"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
