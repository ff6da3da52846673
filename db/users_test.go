package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"flint/jobs"
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
	require.NoError(t, b.store.CreateSession(b.ctx, u.ID, "tok-1", "csrf-1", time.Hour, "127.0.0.1", "test"))

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
	require.ErrorIs(t, err, jobs.ErrNotFound)
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE sessions SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	_, err = b.store.GetSession(b.ctx, "tok-1")
	require.ErrorIs(t, err, jobs.ErrNotFound)
}
