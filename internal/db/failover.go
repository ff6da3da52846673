package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flinthq/flint/internal/domain"
)

// Surviving the loss of the primary. Flint needs a writable server; when
// the primary dies or is demoted and a standby is promoted, connections
// must end up on the new primary without a restart:
//
//   - every new connection (pool, LISTEN session, migrator) checks that
//     its server is writable (not in recovery, not
//     default_transaction_read_only) and is dropped otherwise, so with a
//     multi-host connection string pgx moves on to the next host, and
//     behind a single endpoint (a VIP, a managed database's DNS name,
//     PgBouncer) the pool keeps trying until the endpoint leads to the
//     new primary;
//   - a statement failing with an error that says the server went away or
//     became read-only (failoverCode) resets the whole pool: the other
//     connections are on the same server, and every one of them would fail
//     in turn (or, on a demoted primary, forever: SQLSTATE 25006 leaves the
//     connection open).

// ErrReadOnly means a connection reached a server that cannot take writes:
// a standby, or one with default_transaction_read_only on. It carries
// SQLSTATE 25006 (read_only_sql_transaction), as a write there would.
var ErrReadOnly error = readOnlyError{}

type readOnlyError struct{}

func (readOnlyError) Error() string    { return "database server is read-only" }
func (readOnlyError) SQLState() string { return "25006" }

const writableSQL = `SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')`

// requireWritable wraps a connection's validation (what target_session_attrs
// asked for, if anything) with the check that its server takes writes, so
// that a connection attempt to a standby or a read-only server fails and,
// with several hosts, moves on to the next one.
func requireWritable(next pgconn.ValidateConnectFunc) pgconn.ValidateConnectFunc {
	return func(ctx context.Context, pc *pgconn.PgConn) error {
		if next != nil {
			if err := next(ctx, pc); err != nil {
				return err
			}
		}
		res, err := pc.Exec(ctx, writableSQL).ReadAll()
		if err != nil {
			return fmt.Errorf("check the server is writable: %w", err)
		}
		if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 2 {
			return errors.New("check the server is writable: unexpected answer")
		}
		row := res[0].Rows[0]
		switch {
		case string(row[0]) == "t":
			return fmt.Errorf("%w: %s is a standby (pg_is_in_recovery)", ErrReadOnly, serverDescription(pc))
		case string(row[1]) == "on":
			return fmt.Errorf("%w: %s has default_transaction_read_only on", ErrReadOnly, serverDescription(pc))
		}
		return nil
	}
}

// failoverCode reports whether SQLSTATE code means the connection's
// server is gone, going or read-only: 25006 read_only_sql_transaction (a
// demoted primary), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now (starting up or in recovery), and class 08,
// connection exceptions.
func failoverCode(code string) bool {
	switch code {
	case "25006", "57P01", "57P02", "57P03":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// IsUnavailable reports whether err means the database cannot be reached
// or cannot take writes right now (it is down, failing over, or the
// connection landed on a standby), as opposed to a statement that failed
// on a working database. Callers answer such errors with "try again".
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return failoverCode(pgErr.Code)
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrReadOnly), errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, driver.ErrBadConn),
		pgconn.SafeToRetry(err):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "broken pipe")
}

// failoverWatch resets the store's pool when a statement fails with a
// failover error (failoverCode), at most once a second. It is the pool's
// pgx tracer, and so also puts the statement deadline (db/netfaults.go)
// on every statement.
type failoverWatch struct {
	statementDeadline

	logger *slog.Logger

	mu        sync.Mutex
	pool      *pgxpool.Pool
	lastReset time.Time
	diskFull  atomic.Int64 // unix nanoseconds of the last disk-full error, 0 for none
}

func (w *failoverWatch) observe(ctx context.Context, conn *pgx.Conn, err error) {
	var pgErr *pgconn.PgError
	if err == nil || !errors.As(err, &pgErr) {
		return
	}
	if pgErr.Code == DiskFullCode {
		if prev := w.diskFull.Swap(time.Now().UnixNano()); time.Since(time.Unix(0, prev)) > time.Minute {
			w.logger.ErrorContext(ctx, "the database server's disk is full: PostgreSQL refuses writes until space is freed",
				"server", serverDescription(conn.PgConn()), "error", pgErr.Message)
		}
		return
	}
	if !failoverCode(pgErr.Code) {
		return
	}
	w.mu.Lock()
	pool := w.pool
	due := time.Since(w.lastReset) > time.Second
	if due {
		w.lastReset = time.Now()
	}
	w.mu.Unlock()
	if pool == nil || !due {
		return
	}
	w.logger.WarnContext(ctx, "database server went away or became read-only; reconnecting every pooled connection",
		"server", serverDescription(conn.PgConn()), "sqlstate", pgErr.Code, "error", pgErr.Message)
	// Reset closes idle connections now and in-use ones as they are
	// released; it must not run on this goroutine, which holds one.
	go pool.Reset()
}

// TraceQueryEnd implements pgx.QueryTracer.
func (w *failoverWatch) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	w.observe(ctx, conn, data.Err)
	endStatement(ctx)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (w *failoverWatch) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	w.observe(ctx, conn, data.Err)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (w *failoverWatch) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	w.observe(ctx, conn, data.Err)
	endStatement(ctx)
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (w *failoverWatch) TraceCopyFromEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromEndData) {
	w.observe(ctx, conn, data.Err)
	endStatement(ctx)
}

const serverSQL = `SELECT coalesce(host(inet_server_addr()), ''), coalesce(inet_server_port(), 0),
	pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'`

// Server says which database server the pool is on now, for /readyz: its
// address and port as it reports them, and whether it takes writes.
func (s *Store) Server(ctx context.Context) (domain.DatabaseServer, error) {
	var srv domain.DatabaseServer
	var host string
	var port int
	err := s.pool.QueryRow(ctx, serverSQL).Scan(&host, &port, &srv.InRecovery, &srv.ReadOnly)
	if err != nil {
		return srv, fmt.Errorf("database server: %w", err)
	}
	if host != "" {
		srv.Address = net.JoinHostPort(host, fmt.Sprint(port))
	} else {
		srv.Address = fmt.Sprintf("local socket, port %d", port)
	}
	srv.ReadOnly = srv.ReadOnly || srv.InRecovery
	return srv, nil
}

// DiskFullCode is PostgreSQL's SQLSTATE disk_full: a write found no space
// on the server's disk.
const DiskFullCode = "53100"

// DiskFullWindow is how long after its last disk-full error the store
// says the database's disk is full (DiskFullSeen).
const DiskFullWindow = 30 * time.Second

// DiskFullSeen reports whether a statement of this store failed because
// the database server's disk is full within the last DiskFullWindow, and
// when the last one did.
func (s *Store) DiskFullSeen() (time.Time, bool) {
	ns := s.watch.diskFull.Load()
	if ns == 0 {
		return time.Time{}, false
	}
	at := time.Unix(0, ns)
	return at, time.Since(at) < DiskFullWindow
}
