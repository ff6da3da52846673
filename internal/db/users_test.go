package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

// TestSessionsReadWithoutWritingEachTime: a session is found while live,
// its last_seen_at is refreshed at most once a minute, and an expired or
// deleted session is not found.
func TestSessionsReadWithoutWritingEachTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.EnsureUser(b.ctx, "ops@example.com", "a-long-password", "admin")
	require.NoError(t, err)
	u, err := b.store.Authenticate(b.ctx, "ops@example.com", "a-long-password")
	require.NoError(t, err)
	require.NoError(t, b.store.CreateSession(b.ctx, u.ID, "tok-1", "csrf-1", time.Hour, "127.0.0.1", "127.0.0.1", "test"))

	lastSeen := func() time.Time {
		var at time.Time
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT last_seen_at FROM sessions`).Scan(&at))
		return at
	}
	sess, err := b.store.GetSession(b.ctx, "tok-1")
	require.NoError(t, err)
	require.Equal(t, "ops@example.com", sess.User.Email)
	require.Equal(t, "csrf-1", sess.CSRFToken)

	_, err = b.store.Pool().Exec(b.ctx, `UPDATE sessions SET last_seen_at = now() - interval '2 minutes'`)
	require.NoError(t, err)
	stale := lastSeen()
	_, err = b.store.GetSession(b.ctx, "tok-1")
	require.NoError(t, err)
	fresh := lastSeen()
	require.True(t, fresh.After(stale.Add(time.Minute)), "a stale last_seen_at is refreshed")
	_, err = b.store.GetSession(b.ctx, "tok-1")
	require.NoError(t, err)
	require.Equal(t, fresh, lastSeen(), "a fresh one is left alone")

	_, err = b.store.GetSession(b.ctx, "other")
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE sessions SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	_, err = b.store.GetSession(b.ctx, "tok-1")
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// TestKnownAddresses: a sign-in records its address; the throttle asks
// whether an account has signed in from an address within 180 days.
func TestKnownAddresses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.store.EnsureUser(b.ctx, "ops@example.com", "a-long-password", "admin")
	require.NoError(t, err)
	u, err := b.store.UserByEmail(b.ctx, "ops@example.com")
	require.NoError(t, err)
	known := func(email, addr string) bool {
		t.Helper()
		k, err := b.store.KnownAddress(b.ctx, email, addr)
		require.NoError(t, err)
		return k
	}
	require.False(t, known("ops@example.com", "203.0.113.7"))
	require.NoError(t, b.store.CreateSession(b.ctx, u.ID, "tok-a", "csrf", time.Hour, "203.0.113.7", "203.0.113.7", ""))
	require.True(t, known("OPS@example.com", "203.0.113.7"))
	require.False(t, known("ops@example.com", "203.0.113.8"))
	require.False(t, known("nobody@example.com", "203.0.113.7"))

	// An address unused for 180 days is forgotten.
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE login_addresses SET last_signed_in_at = now() - interval '200 days'`)
	require.NoError(t, err)
	require.False(t, known("ops@example.com", "203.0.113.7"))
	require.NoError(t, b.store.CreateSession(b.ctx, u.ID, "tok-b", "csrf", time.Hour, "198.51.100.1", "198.51.100.1", ""))
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM login_addresses`).Scan(&n))
	require.Equal(t, 1, n, "the old one is deleted at the next sign-in")
	require.NoError(t, b.store.CreateSession(b.ctx, u.ID, "tok-c", "csrf", time.Hour, "198.51.100.1", "198.51.100.1", ""))
	require.True(t, known("ops@example.com", "198.51.100.1"))
}
