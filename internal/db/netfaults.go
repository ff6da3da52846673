package db

import (
	"context"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
)

// Surviving a network partition. A firewall or NAT that forgets a
// connection's state, or a link that stops carrying packets, leaves both
// ends believing the connection open: a statement in flight waits for an
// answer that never comes, and a process that nothing wakes never notices.
// So every connection Flint holds to PostgreSQL (the pool, the LISTEN
// session, the migrator) and to Redis notices a dead peer within a bounded
// time:
//
//   - TCP keepalives after KeepAliveIdle of silence, every
//     KeepAliveInterval, KeepAliveCount times, and TCP_USER_TIMEOUT
//     (TCPUserTimeout): the kernel gives up on a connection whose data
//     stays unacknowledged that long. They catch a peer that vanished;
//   - a deadline on every statement (StatementTimeout), enforced by the
//     client: it catches what keepalives cannot, a middlebox (a proxy, a
//     load balancer) that acknowledges bytes and then drops them. When it
//     passes, the connection is closed and the pool dials a new one;
//   - a deadline on every connection attempt (ConnectTimeout), unless the
//     connection string sets connect_timeout, and on the pool's check of
//     an idle connection before it hands it out (PingTimeout);
//   - on the server, where the connection string does not say otherwise
//     and no pooler is in between, the same keepalives (tcp_keepalives_*,
//     tcp_user_timeout), so that PostgreSQL ends the sessions of clients
//     it can no longer reach and their locks go with them.
//
// The LISTEN session proves itself every health interval with a statement
// (db/listener.go); Redis commands have their own read and write timeouts
// (db/redis_url.go). A process cut off for longer than a lease loses its
// jobs to the reaper; its late finishes are refused by the fencing token.

const (
	// StatementTimeout bounds every statement Flint issues, from sending
	// it to reading the last row, unless the caller's context ends sooner
	// or it asked for another bound (WithStatementTimeout). Flint's
	// statements take milliseconds; 20 s is far past any of them under
	// load and well under the 30 s lease, so a worker cut off mid-claim
	// or mid-heartbeat frees its connection before its jobs are reaped.
	StatementTimeout = 20 * time.Second
	// PingTimeout bounds the check the pool makes of a connection that
	// sat idle before handing it out (pgxpool's PingTimeout, which is
	// none by default): a ping on a connection cut off by a partition
	// would otherwise wait for ever.
	PingTimeout = 5 * time.Second
	// ConnectTimeout bounds dialling, TLS and authentication of a new
	// connection when the connection string has no connect_timeout.
	ConnectTimeout = 10 * time.Second
	// KeepAliveIdle is the silence after which TCP keepalive probes start.
	KeepAliveIdle = 10 * time.Second
	// KeepAliveInterval is the time between two keepalive probes.
	KeepAliveInterval = 5 * time.Second
	// KeepAliveCount is how many unanswered probes close the connection:
	// an idle connection to a vanished peer dies within 25 s.
	KeepAliveCount = 3
	// TCPUserTimeout is how long sent data may stay unacknowledged before
	// the kernel closes the connection.
	TCPUserTimeout = 20 * time.Second
)

// statementTimeoutKey marks a context with the statement deadline its
// statements get instead of StatementTimeout.
type statementTimeoutKey struct{}

// WithStatementTimeout makes the statements issued with ctx take up to d
// (instead of StatementTimeout); d zero or less means no client-side
// bound. Migrations use it: building an index may take hours.
func WithStatementTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, statementTimeoutKey{}, d)
}

// statementCancelKey carries the cancel function of a statement's
// deadline from its trace start to its trace end.
type statementCancelKey struct{}

// withStatementDeadline is ctx bounded by the statement deadline.
func withStatementDeadline(ctx context.Context) context.Context {
	d := StatementTimeout
	if v, ok := ctx.Value(statementTimeoutKey{}).(time.Duration); ok {
		d = v
	}
	if d <= 0 {
		return ctx
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return context.WithValue(ctx, statementCancelKey{}, cancel)
}

// endStatement releases the deadline withStatementDeadline set, if any.
func endStatement(ctx context.Context) {
	if cancel, ok := ctx.Value(statementCancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// statementDeadline is a pgx tracer that puts the statement deadline on
// every query, batch and COPY of a connection.
type statementDeadline struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (statementDeadline) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return withStatementDeadline(ctx)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (statementDeadline) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	endStatement(ctx)
}

// TraceBatchStart implements pgx.BatchTracer.
func (statementDeadline) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return withStatementDeadline(ctx)
}

// TraceBatchQuery implements pgx.BatchTracer.
func (statementDeadline) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (statementDeadline) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	endStatement(ctx)
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (statementDeadline) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	return withStatementDeadline(ctx)
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (statementDeadline) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromEndData) {
	endStatement(ctx)
}

// Dialer is the dialer of every connection Flint makes to PostgreSQL and
// Redis: TCP keepalives and TCP_USER_TIMEOUT as the constants above say.
// Unix sockets are dialled plainly.
func Dialer() *net.Dialer {
	return &net.Dialer{
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: KeepAliveIdle, Interval: KeepAliveInterval, Count: KeepAliveCount,
		},
		Control: func(network, _ string, rc syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(TCPUserTimeout/time.Millisecond))
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
}

// guardConnConfig gives a parsed connection configuration Flint's dialer
// and, where the string set none, its connect timeout.
func guardConnConfig(cfg *pgconn.Config) {
	cfg.DialFunc = Dialer().DialContext
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = ConnectTimeout
	}
}

// serverKeepalives are the session settings that make PostgreSQL notice a
// vanished client (see the top of this file), added to a direct
// connection's startup parameters unless the connection string sets them.
var serverKeepalives = map[string]string{
	"tcp_keepalives_idle":     "10",
	"tcp_keepalives_interval": "5",
	"tcp_keepalives_count":    "3",
	"tcp_user_timeout":        "20000",
}

// addServerKeepalives adds serverKeepalives to params.
func addServerKeepalives(params map[string]string) {
	for k, v := range serverKeepalives {
		if _, set := params[k]; !set {
			params[k] = v
		}
	}
}
