package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listener holds one dedicated connection that LISTENs on Flint's channels
// and hands each notification to the registered callbacks. A LISTEN
// connection can die silently, leaving workers on their polling backstop, so
// the listener checks every HealthInterval that the connection still
// answers and still listens, and reconnects with backoff when it does not.
// After every (re)connect it calls the OnConnect callbacks, since
// notifications sent while it was away are lost.
//
// LISTEN needs a session of its own on the server, which a pooler in
// transaction mode (PgBouncer) cannot give, so it takes a direct
// connection. A listener without one (URL "") never listens: it calls the
// OnConnect callbacks at start and then every PollInterval, as if it had
// just reconnected, and everything notifications would have hastened is
// left to the callers' polling backstops.
type Listener struct {
	url            string
	logger         *slog.Logger
	healthInterval time.Duration

	mu        sync.RWMutex
	handlers  map[string][]func(payload string)
	onConnect []func()
}

// PollInterval is how often a listener without a connection calls its
// OnConnect callbacks.
const PollInterval = 30 * time.Second

// NewListener returns a listener for the database at url; url "" makes a
// listener that only polls (see Listener). healthInterval zero means 10 s.
func NewListener(url string, logger *slog.Logger, healthInterval time.Duration) *Listener {
	if healthInterval <= 0 {
		healthInterval = 10 * time.Second
	}
	return &Listener{
		url:            url,
		logger:         logger.With("component", "listener"),
		healthInterval: healthInterval,
		handlers:       map[string][]func(string){},
	}
}

// Handle registers fn for notifications on channel. Register before Run.
func (l *Listener) Handle(channel string, fn func(payload string)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handlers[channel] = append(l.handlers[channel], fn)
}

// OnConnect registers fn to run after every successful (re)connect.
func (l *Listener) OnConnect(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onConnect = append(l.onConnect, fn)
}

// Run listens until ctx is done, reconnecting as needed. It returns nil on
// a clean stop.
func (l *Listener) Run(ctx context.Context) error {
	if l.url == "" {
		return l.poll(ctx, PollInterval)
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		started := time.Now()
		err := l.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = 100 * time.Millisecond // it had been fine: a fresh loss, not a long outage
		}
		l.logger.WarnContext(ctx, "listen connection lost; reconnecting", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff + time.Duration(rand.Int64N(int64(backoff/2+1)))):
		}
		// Short enough that notifications resume within seconds of a
		// failover's promotion, however long the database was away.
		backoff = min(backoff*2, 2*time.Second)
	}
	return nil
}

// poll stands in for notifications when there is no direct connection.
func (l *Listener) poll(ctx context.Context, every time.Duration) error {
	l.logger.InfoContext(ctx, "LISTEN is off (no direct connection to PostgreSQL); polling instead", "every", every)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		l.mu.RLock()
		onConnect := slices.Clone(l.onConnect)
		l.mu.RUnlock()
		for _, fn := range onConnect {
			fn()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// session runs one connection until it fails or ctx is done.
func (l *Listener) session(ctx context.Context) error {
	cfg, err := ParseConnConfig("the LISTEN connection string", l.url)
	if err != nil {
		return err
	}
	connectCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	// A standby cannot LISTEN, and would never hear the primary's NOTIFY:
	// ParseConnConfig's connections land on a writable server only.
	conn, err := pgx.ConnectConfig(connectCtx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	l.mu.RLock()
	channels := make([]string, 0, len(l.handlers))
	for ch := range l.handlers {
		channels = append(channels, ch)
	}
	onConnect := slices.Clone(l.onConnect)
	l.mu.RUnlock()
	slices.Sort(channels)
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	l.logger.DebugContext(ctx, "listening", "channels", channels)
	for _, fn := range onConnect {
		fn()
	}

	for {
		waitCtx, cancel := context.WithTimeout(ctx, l.healthInterval)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			l.dispatch(n.Channel, n.Payload)
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			if err := l.checkHealth(ctx, conn, channels); err != nil {
				return err
			}
		default:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

const listeningChannelsSQL = `SELECT pg_listening_channels()`

// checkHealth proves the connection is alive and still listening.
func (l *Listener) checkHealth(ctx context.Context, conn *pgx.Conn, want []string) error {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := conn.Query(hctx, listeningChannelsSQL)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	for _, ch := range want {
		if !slices.Contains(got, ch) {
			return fmt.Errorf("health check: no longer listening on %s", ch)
		}
	}
	return nil
}

func (l *Listener) dispatch(channel, payload string) {
	l.mu.RLock()
	fns := l.handlers[channel]
	l.mu.RUnlock()
	for _, fn := range fns {
		fn(payload)
	}
}
