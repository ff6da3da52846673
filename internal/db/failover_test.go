package db_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/jobs"
)

// enqueuer enqueues one job at a time until stopped, remembering every
// enqueue the store acknowledged and when the last one was.
type enqueuer struct {
	mu        sync.Mutex
	acked     []uuid.UUID
	failures  int
	lastAck   time.Time
	lastError error
	answered  chan struct{} // closed and replaced at each answer
	stop      chan struct{}
	done      chan struct{}
}

func startEnqueuer(ctx context.Context, s *db.Store) *enqueuer {
	e := &enqueuer{answered: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		for {
			select {
			case <-e.stop:
				return
			default:
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res, err := s.Enqueue(cctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
			cancel()
			e.mu.Lock()
			if err == nil {
				e.acked = append(e.acked, res[0].Job.ID)
				e.lastAck = time.Now()
			} else {
				e.failures++
				e.lastError = err
			}
			close(e.answered)
			e.answered = make(chan struct{})
			e.mu.Unlock()
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the scenario: a client backs off before it retries
			}
		}
	}()
	return e
}

// await waits, answer by answer, until cond (called with e.mu held) holds.
func (e *enqueuer) await(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(limit)
	for {
		e.mu.Lock()
		ok, next, lastErr := cond(), e.answered, e.lastError
		e.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("%s: not within %s (last error: %v)", what, limit, lastErr)
		}
	}
}

// waitAcked waits until an enqueue was acknowledged after since, returning
// when.
func (e *enqueuer) waitAcked(t *testing.T, since time.Time, limit time.Duration) time.Time {
	t.Helper()
	var last time.Time
	e.await(t, limit, "an enqueue acknowledged after "+since.Format(time.TimeOnly), func() bool {
		last = e.lastAck
		return last.After(since)
	})
	return last
}

// waitMoreAcked waits until n more enqueues than now were acknowledged.
func (e *enqueuer) waitMoreAcked(t *testing.T, n int, limit time.Duration) {
	t.Helper()
	e.mu.Lock()
	want := len(e.acked) + n
	e.mu.Unlock()
	e.await(t, limit, fmt.Sprintf("%d more enqueues acknowledged", n), func() bool { return len(e.acked) >= want })
}

func (e *enqueuer) finish() []uuid.UUID {
	close(e.stop)
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.acked
}

// requireAllPresent checks that every acknowledged enqueue is on the
// server the store is on now.
func requireAllPresent(t *testing.T, ctx context.Context, s *db.Store, acked []uuid.UUID) {
	t.Helper()
	var found int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM jobs WHERE id = ANY($1)`, acked).Scan(&found))
	require.Equal(t, len(acked), found, "every acknowledged enqueue survives the failover")
}

func pairStore(t *testing.T, ctx context.Context, url string) *db.Store {
	t.Helper()
	require.NoError(t, db.Migrate(ctx, url, slog.New(slog.NewTextHandler(io.Discard, nil))))
	s, err := db.Open(ctx, db.Config{URL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// TestStoreFollowsFailover: the primary of a synchronous pair is killed
// and its standby promoted while enqueues go on. The store reconnects to
// the new primary without being reopened, and every enqueue it
// acknowledged is there.
func TestStoreFollowsFailover(t *testing.T) {
	t.Parallel()
	p := dbtest.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := pairStore(t, ctx, p.URL("flint"))
	first := p.Primary()
	srv, err := s.Server(ctx)
	require.NoError(t, err)
	require.Equal(t, first.Addr(), srv.Address)
	require.False(t, srv.ReadOnly)

	e := startEnqueuer(ctx, s)
	e.waitAcked(t, time.Now(), 10*time.Second)
	e.waitMoreAcked(t, 20, 10*time.Second) // enqueues under way when the primary dies
	promoted := p.Failover()
	back := e.waitAcked(t, promoted, 15*time.Second)
	t.Logf("enqueues acknowledged again %s after the promotion", back.Sub(promoted).Round(time.Millisecond))
	e.waitAcked(t, back.Add(200*time.Millisecond), 5*time.Second)
	acked := e.finish()

	srv, err = s.Server(ctx)
	require.NoError(t, err)
	require.Equal(t, p.Primary().Addr(), srv.Address)
	require.NotEqual(t, first.Addr(), srv.Address)
	requireAllPresent(t, ctx, s, acked)
}

// TestStoreLeavesReadOnlyServer: the primary turns read-only but stays up
// (as a primary being demoted does) and the standby is promoted. The
// connection string has no target_session_attrs, so nothing but the store
// notices: writes on its pooled connections fail with SQLSTATE 25006, the
// pool drops them, and new connections pass over the read-only server.
func TestStoreLeavesReadOnlyServer(t *testing.T) {
	t.Parallel()
	p := dbtest.NewPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	url := strings.Replace(p.URL("flint"), "&target_session_attrs=read-write", "", 1)
	s := pairStore(t, ctx, url)
	old := p.Primary()

	e := startEnqueuer(ctx, s)
	e.waitAcked(t, time.Now(), 10*time.Second)
	p.SetReadOnly(old, true)
	promoted := p.Promote()
	back := e.waitAcked(t, promoted, 15*time.Second)
	t.Logf("enqueues acknowledged again %s after the promotion", back.Sub(promoted).Round(time.Millisecond))
	acked := e.finish()

	srv, err := s.Server(ctx)
	require.NoError(t, err)
	require.Equal(t, p.Primary().Addr(), srv.Address, "the pool left the read-only server")
	require.False(t, srv.ReadOnly)
	requireAllPresent(t, ctx, s, acked)

	// A server that is only a standby is refused too: with the old primary
	// read-only and the new one gone, the store cannot write anywhere, and
	// says so as unavailability.
	p.Kill()
	_, err = s.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
	require.Error(t, err)
	require.True(t, db.IsUnavailable(err), "%v", err)
}

// TestPoolResetsOnServerShutdownError: a statement failing with 57P01
// (admin_shutdown: the server is going away, as in a switchover) drops
// every pooled connection, not just the one that failed, so the pool does
// not hand out one dead connection after another.
func TestPoolResetsOnServerShutdownError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _ := dbtest.NewStore(t)
	pool := s.Pool()

	// Four pooled connections, idle.
	conns := make([]*pgxpool.Conn, 4)
	pids := make([]uint32, 4)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		require.NoError(t, err)
		conns[i], pids[i] = c, c.Conn().PgConn().PID()
	}
	for _, c := range conns[1:] {
		c.Release()
	}
	victim := conns[0]

	admin, err := pgx.Connect(ctx, dbtest.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, int32(pids[0]))
	require.NoError(t, err)
	_, err = victim.Exec(ctx, `SELECT 1`)
	require.Error(t, err)
	require.True(t, db.IsUnavailable(err), "%v", err)
	victim.Release()

	others := []int32{int32(pids[1]), int32(pids[2]), int32(pids[3])}
	require.Eventually(t, func() bool {
		var alive int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, others).Scan(&alive)
		return err == nil && alive == 0
	}, 10*time.Second, 20*time.Millisecond, "the other pooled connections were closed too")

	// And the pool works on.
	_, err = s.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
	require.NoError(t, err)
}
