package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Notification channels.
const (
	// ChannelJobs carries a queue name whenever a job becomes queued there.
	ChannelJobs = "flint_jobs"
	// ChannelDue carries a queue name when jobs queued there ahead of
	// their time (promoted early: scheduler.DefaultPromoteAhead) reach
	// it, for those that claim only due jobs: long-polling pull workers
	// and push deliveries. An in-process pool holds such jobs from the
	// promotion on and does not listen: a claim for each of these would
	// find nothing, on the cores the wakes need.
	ChannelDue = "flint_due"
	// ChannelCancel carries a job id whenever cancellation of a running job
	// is requested, so its worker need not wait for the next heartbeat.
	ChannelCancel = "flint_cancel"
	// ChannelScheduled carries jobs that became scheduled (delayed jobs,
	// retries, recurring occurrences) so that schedulers add them to their
	// in-memory index: comma-separated "id run_at_ms priority created_us".
	ChannelScheduled = "flint_scheduled"
)

// Config configures a Store.
type Config struct {
	// URL is the PostgreSQL connection string.
	URL string
	// MaxConns caps the pool; zero means URL's pool_max_conns, else
	// pgxpool's default (the larger of 4 and the number of CPUs), raised
	// to 16 if it is lower: pgxpool's default is too small under load.
	MaxConns int32
	// MaxInterruptions is how many lease expiries send a job to the DLQ;
	// zero or less means domain.DefaultMaxInterruptions.
	MaxInterruptions int
	// Pooler names the connection pooler URL goes through: "" for none
	// (a direct connection), or PoolerPgBouncer.
	Pooler string
	// Logger receives the pool's reconnection notices; nil means
	// slog.Default().
	Logger *slog.Logger
	// WakeupWindow is the shortest time between two notification
	// statements (see wakeup.go); zero means DefaultWakeupWindow.
	WakeupWindow time.Duration
	// EnqueueWindow is how long a group commit of single enqueues waits,
	// after its first job, for others (see groupcommit.go); zero means
	// DefaultEnqueueWindow, negative turns group commit off.
	EnqueueWindow time.Duration
	// EnqueueBatch caps the jobs of one group commit; zero means
	// DefaultEnqueueBatch.
	EnqueueBatch int
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
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
	events           domain.EventSink
	redis            *Redis
	flow             atomic.Pointer[flowState]                          // queue settings as last loaded (db/queues.go)
	keyed            sync.Map                                           // fair queue name -> time.Time: claimed with key rotation until then (db/flow_hold.go)
	historyParts     sync.Map                                           // history partition name -> struct{}: known to exist (db/history_partitions.go)
	waker            *waker                                             // wake-ups sent after commit (db/wakeup.go)
	group            *groupCommitter                                    // single enqueues gathered into batches; nil when off (db/groupcommit.go)
	steps            *committer[stepRequest, stepAnswer, stepKey]       // numbered step records gathered into batches (db/stepcommit.go)
	stepsRecorded    atomic.Uint64                                      // steps the step committer inserted (StepCommits)
	signals          *committer[signalRequest, signalAnswer, uuid.UUID] // signals gathered into batches (db/signalcommit.go)
	watch            *failoverWatch                                     // the pool's tracer: failovers, disk-full errors (db/failover.go)
}

// SetEventSink makes the store announce every state change it commits to
// sink. Call it before the store is used concurrently.
func (s *Store) SetEventSink(sink domain.EventSink) { s.events = sink }

// emitMoved announces committed moves.
func (s *Store) emitMoved(moved []domain.Moved) {
	if s.events != nil && len(moved) > 0 {
		if evs := domain.EventsFromMoved(moved, time.Now()); len(evs) > 0 {
			s.events.Publish(evs)
		}
	}
}

// emitJobs announces the current state of committed jobs.
func (s *Store) emitJobs(js ...*jobs.Job) {
	if s.events != nil && len(js) > 0 {
		s.events.Publish(domain.EventsFromJobs(js, time.Now()))
	}
}

// publish announces committed changes: the jobs js as they now are and
// the moves in moved, then wakes the workers and timers that can act on
// them. Publishing comes first: a woken worker's claim publishes
// "claimed", and had the wake-up gone first, that event could reach the
// stream before the "queued" of the change that queued the job (the bus
// keeps the order in which events are published). Every change that both
// publishes and wakes goes through here.
func (s *Store) publish(js []*jobs.Job, moved ...[]domain.Moved) {
	s.emitJobs(js...)
	for _, m := range moved {
		s.emitMoved(m)
	}
	s.wakeJobs(js...)
	for _, m := range moved {
		s.wakeMoved(m)
	}
}

// Open connects to PostgreSQL as cfg says and pings it, giving up after
// 10 s, then starts the store's wake-up sender and group committer; Close
// stops them and closes the pool. A malformed cfg.URL is an error that
// names the problem without echoing the password.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := CheckConnString("DATABASE_URL", cfg.URL); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL) // the same parser, with the pool's settings
	if err != nil {
		return nil, fmt.Errorf("open database: %w", connStringError("DATABASE_URL", cfg.URL, err))
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
	// Flint's statements are short and run thousands of times a second;
	// PostgreSQL's JIT, which compiles any statement whose estimate passes
	// jit_above_cost, would spend tens of milliseconds compiling a claim
	// that runs in one (a claim of jobs with parents estimates high). Off
	// for Flint's connections unless the URL says otherwise; PgBouncer
	// refuses unknown startup parameters, so through it the server's
	// setting stands.
	if _, set := pcfg.ConnConfig.RuntimeParams["jit"]; !set && cfg.Pooler != PoolerPgBouncer {
		pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	// A connection to a server that cannot take writes (a standby, a
	// demoted primary) is refused, so the pool moves on (db/failover.go).
	pcfg.ConnConfig.ValidateConnect = requireWritable(pcfg.ConnConfig.ValidateConnect)
	// Keepalives, connect and statement deadlines (db/netfaults.go).
	guardConnConfig(&pcfg.ConnConfig.Config)
	if pcfg.PingTimeout == 0 { // pool_ping_timeout not in the URL
		pcfg.PingTimeout = PingTimeout
	}
	if cfg.Pooler != PoolerPgBouncer {
		addServerKeepalives(pcfg.ConnConfig.RuntimeParams)
	}
	pcfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		registerUUID(conn)
		return nil
	}
	watch := &failoverWatch{logger: cmpLogger(cfg.Logger).With("component", "database")}
	pcfg.ConnConfig.Tracer = watch
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
	watch.mu.Lock()
	watch.pool = pool
	watch.mu.Unlock()
	maxInt := cfg.MaxInterruptions
	if maxInt <= 0 {
		maxInt = domain.DefaultMaxInterruptions
	}
	s := &Store{
		pool:             pool,
		sqlx:             sqlx.NewDb(stdlib.OpenDBFromPool(pool), "pgx"),
		maxInterruptions: maxInt,
		waker:            newWaker(pool, cfg.WakeupWindow),
		watch:            watch,
	}
	s.waker.start()
	s.steps = newStepCommitter(s)
	s.steps.start()
	s.signals = newSignalCommitter(s)
	s.signals.start()
	if s.group = newGroupCommitter(s, cfg.EnqueueWindow, cfg.EnqueueBatch); s.group != nil {
		s.group.start()
	}
	return s, nil
}

// Close writes the single enqueues still waiting for a group commit, sends
// the wake-ups still waiting and closes every connection.
func (s *Store) Close() {
	if s.group != nil {
		s.group.close()
	}
	s.steps.close()
	s.signals.close()
	s.waker.close()
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

// DBTX is what a query needs: a pool, a connection or a transaction
// (*pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy it). EnqueueTx and
// AnnounceTx take one so that callers can enqueue in their own
// transaction.
type DBTX interface {
	// Exec runs a statement that returns no rows.
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	// Query runs a statement and returns its rows, which the caller closes.
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	// QueryRow runs a statement for one row; its error is reported by Scan.
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
