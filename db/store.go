package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"flint/jobs"
)

// Notification channels.
const (
	// ChannelJobs carries a queue name whenever a job becomes queued there.
	ChannelJobs = "flint_jobs"
	// ChannelCancel carries a job id whenever cancellation of a running job
	// is requested, so its worker need not wait for the next heartbeat.
	ChannelCancel = "flint_cancel"
	// ChannelScheduled carries jobs that became scheduled (delayed jobs,
	// retries, recurring occurrences) so that schedulers add them to their
	// in-memory index: comma-separated "id run_at_ms priority created_us".
	ChannelScheduled = "flint_scheduled"
)

// notifyScheduledHead and notifyScheduledTail wrap the name of a CTE that
// returns id, status, run_at, effective_priority and created_at: the CTE
// they form announces the rows that are scheduled on ChannelScheduled, 90
// to a notification (well under PostgreSQL's 8,000-byte payload limit).
// The statement must select from it (FROM ..., sched_notified) so it runs.
const notifyScheduledHead = `
sched_notified AS (
	SELECT count(pg_notify('` + ChannelScheduled + `', chunk)) AS n FROM (
		SELECT string_agg(format('%s %s %s %s', id, (extract(epoch FROM run_at) * 1000)::bigint,
		                         effective_priority, (extract(epoch FROM created_at) * 1000000)::bigint), ',') AS chunk
		FROM (SELECT id, run_at, effective_priority, created_at, (row_number() OVER ()) / 90 AS grp FROM `

const notifyScheduledTail = ` WHERE status = 'scheduled') s
		GROUP BY grp) c
)`

// Config configures a Store.
type Config struct {
	// URL is the PostgreSQL connection string.
	URL string
	// MaxConns caps the pool; zero means 4 × GOMAXPROCS plus headroom for
	// LISTEN and maintenance (pgxpool's default is too small under load).
	MaxConns int32
	// MaxInterruptions is how many lease expiries send a job to the DLQ;
	// zero means jobs.DefaultMaxInterruptions.
	MaxInterruptions int
	// Pooler names the connection pooler URL goes through: "" for none
	// (a direct connection), or PoolerPgBouncer.
	Pooler string
}

// PoolerPgBouncer is PgBouncer in transaction-pooling mode: consecutive
// transactions of one client connection may run on different server
// connections, so nothing may outlive a transaction on the server. Flint's
// statements keep no session state (advisory locks and set_config are
// transaction-scoped; COPY runs inside a transaction), but pgx's default of
// naming and caching prepared statements per connection does not hold
// there: a statement prepared on one server connection is missing on the
// next ("prepared statement ... does not exist"). Through PgBouncer the
// store caches statement descriptions instead and executes each statement
// unnamed, still in one round trip.
const PoolerPgBouncer = "pgbouncer"

// Store is Flint's PostgreSQL storage. It is safe for concurrent use.
type Store struct {
	pool             *pgxpool.Pool // jobs rows, the hot path, transactions
	sqlx             *sqlx.DB      // read models, by column name
	maxInterruptions int
	events           jobs.EventSink
	redis            *Redis
	flow             atomic.Pointer[flowState] // queue settings as last loaded (db/queues.go)
	keyed            sync.Map                  // fair queue name -> time.Time: claimed with key rotation until then (db/claim_flow.go)
	historyParts     sync.Map                  // history partition name -> struct{}: known to exist (db/archive.go)
}

// SetEventSink makes the store announce every state change it commits to
// sink. Call it before the store is used concurrently.
func (s *Store) SetEventSink(sink jobs.EventSink) { s.events = sink }

// emitMoved announces committed moves.
func (s *Store) emitMoved(moved []jobs.Moved) {
	if s.events != nil && len(moved) > 0 {
		if evs := jobs.EventsFromMoved(moved, time.Now()); len(evs) > 0 {
			s.events.Publish(evs)
		}
	}
}

// emitJobs announces the current state of committed jobs.
func (s *Store) emitJobs(js ...*jobs.Job) {
	if s.events != nil && len(js) > 0 {
		s.events.Publish(jobs.EventsFromJobs(js, time.Now()))
	}
}

// Open connects to PostgreSQL and pings it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("open database: parse DATABASE_URL: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	} else if pcfg.MaxConns < 16 {
		pcfg.MaxConns = 16
	}
	pcfg.MaxConnIdleTime = 5 * time.Minute
	if cfg.Pooler == PoolerPgBouncer && !strings.Contains(cfg.URL, "default_query_exec_mode=") {
		pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: ping: %w", err)
	}
	maxInt := cfg.MaxInterruptions
	if maxInt <= 0 {
		maxInt = 3
	}
	return &Store{
		pool:             pool,
		sqlx:             sqlx.NewDb(stdlib.OpenDBFromPool(pool), "pgx"),
		maxInterruptions: maxInt,
	}, nil
}

// Close closes every connection.
func (s *Store) Close() {
	_ = s.sqlx.Close()
	s.pool.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Pool exposes the pgx pool for callers that enqueue inside their own
// transactions (see EnqueueTx) and for tests.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// DBTX is what a query needs: a pool, a connection or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// withTx runs fn in a transaction, committing if it returns nil and rolling
// back otherwise (also when ctx is cancelled mid-way). A transaction that
// PostgreSQL aborts to break a deadlock or a serialization conflict is run
// again, a few times.
func (s *Store) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tryTx(ctx, fn)
		if err == nil || attempt == 5 || !isRetryable(err) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt*attempt) * 5 * time.Millisecond)
	}
}

// isRetryable reports whether err is a deadlock or serialization failure.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

func (s *Store) tryTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
