package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
)

// TestDatabaseUnavailableAgreesWithDB: the HTTP layer, which may not import
// pgx, tells a database that is away from a failed statement as the db
// package does.
func TestDatabaseUnavailableAgreesWithDB(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("enqueue: %w", &pgconn.PgError{Code: code, Message: "x"}) }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for err, want := range map[error]bool{
		pg("25006"): true, // a read-only (demoted) server
		pg("57P01"): true, // admin shutdown
		pg("57P02"): true, // crash shutdown
		pg("57P03"): true, // starting up, in recovery
		pg("08006"): true, // connection failure
		pg("08001"): true,
		fmt.Errorf("connect: %w", db.ErrReadOnly):         true,
		fmt.Errorf("list jobs: %w", refused):              true,
		fmt.Errorf("read: %w", io.ErrUnexpectedEOF):       true,
		fmt.Errorf("query: %w", context.DeadlineExceeded): true,
		pg("23505"): false, // unique violation
		pg("40P01"): false, // deadlock
		pg("22P02"): false, // bad input
		fmt.Errorf("get job: %w", domain.ErrNotFound): false,
		errors.New("something else"):                  false,
		fmt.Errorf("cancelled: %w", context.Canceled): false,
	} {
		require.Equal(t, want, databaseUnavailable(err), "handlers: %v", err)
		require.Equal(t, want, db.IsUnavailable(err), "db: %v", err)
	}
}
