package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
)

const (
	insertSessionSQL = `
INSERT INTO sessions (id, user_id, csrf_token, expires_at, ip, user_agent)
VALUES ($1, $2, $3, now() + $4 * interval '1 second', $5, $6)`
	touchLoginSQL = `UPDATE users SET last_login_at = now() WHERE id = $1`
	// rememberAddressSQL notes the address of a sign-in (see
	// KnownAddress) and forgets the user's addresses unused for 180 days.
	rememberAddressSQL = `
WITH forget AS (
	DELETE FROM login_addresses WHERE user_id = $1 AND address <> $2 AND last_signed_in_at < now() - interval '180 days'
)
INSERT INTO login_addresses (user_id, address) VALUES ($1, $2)
ON CONFLICT (user_id, address) DO UPDATE SET last_signed_in_at = now()`
	deleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expires_at < now()`
	deleteSessionSQL         = `DELETE FROM sessions WHERE id = $1`
)

// CreateSession stores a new session for the user behind token, valid for
// ttl, and records the login and the address it came from (address is
// the sign-in throttle's form of ip; "" records none).
func (s *Store) CreateSession(ctx context.Context, userID uuid.UUID, token, csrf string, ttl time.Duration, ip, address, userAgent string) error {
	if len(userAgent) > 300 {
		userAgent = userAgent[:300]
	}
	userAgent = strings.ToValidUTF8(strings.ReplaceAll(userAgent, "\x00", ""), "")
	b := &pgx.Batch{}
	b.Queue(insertSessionSQL,
		auth.HashToken(token), userID, csrf, ttl.Seconds(), ip, userAgent)
	b.Queue(touchLoginSQL, userID)
	if address != "" {
		b.Queue(rememberAddressSQL, userID, address)
	}
	b.Queue(deleteExpiredSessionsSQL)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// getSessionSQL reads a live session; last_seen_at is written at most once
// a minute, so that the requests of an open dashboard (live swaps every
// second) are reads. The user's role is read with it on every request, so
// a changed role applies at once; a disabled user's sessions are deleted
// when they are disabled, and the join refuses them besides.
const getSessionSQL = `
WITH live AS (
	SELECT s.id, s.last_seen_at, u.id AS user_id, u.email, u.role, u.created_at, u.last_login_at, s.csrf_token, s.expires_at
	FROM sessions s JOIN users u ON u.id = s.user_id
	WHERE s.id = $1 AND s.expires_at > now() AND u.disabled_at IS NULL
),
touched AS (
	UPDATE sessions SET last_seen_at = now()
	FROM live WHERE sessions.id = live.id AND live.last_seen_at < now() - interval '1 minute'
)
SELECT user_id, email, role, created_at, last_login_at, csrf_token, expires_at FROM live`

// GetSession returns the live session behind token.
func (s *Store) GetSession(ctx context.Context, token string) (auth.Session, error) {
	var sess auth.Session
	err := s.pool.QueryRow(ctx, getSessionSQL, auth.HashToken(token)).
		Scan(&sess.User.ID, &sess.User.Email, &sess.User.Role, &sess.User.CreatedAt, &sess.User.LastLoginAt, &sess.CSRFToken, &sess.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.Session{}, domain.ErrNotFound
	}
	if err != nil {
		return auth.Session{}, fmt.Errorf("get session: %w", err)
	}
	return sess, nil
}

// sincePasswordChangeSQL is how long ago the password of the user with
// this email was set, by the database's clock (so that the caller's clock
// need not agree with it); NULL when it was never changed.
const sincePasswordChangeSQL = `
SELECT extract(epoch FROM now() - password_changed_at)::float8 FROM users
WHERE lower(email) = lower($1) AND password_changed_at IS NOT NULL`

// SincePasswordChange returns how long ago the password of the user with
// this email was last set (a reset or a change), or domain.ErrNotFound when
// there is no such user or the password was never changed.
func (s *Store) SincePasswordChange(ctx context.Context, email string) (time.Duration, error) {
	var secs float64
	err := s.pool.QueryRow(ctx, sincePasswordChangeSQL, strings.TrimSpace(email)).Scan(&secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, domain.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("read password change: %w", err)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// knownAddressSQL says whether the user with this email has signed in
// from address within the last 180 days (one primary-key read).
const knownAddressSQL = `
SELECT EXISTS (
	SELECT 1 FROM login_addresses a JOIN users u ON u.id = a.user_id
	WHERE lower(u.email) = lower($1) AND a.address = $2 AND a.last_signed_in_at > now() - interval '180 days')`

// KnownAddress reports whether the user with this email has signed in
// from address (as CreateSession recorded it) within the last 180 days;
// false when there is no such user.
func (s *Store) KnownAddress(ctx context.Context, email, address string) (bool, error) {
	var known bool
	if err := s.pool.QueryRow(ctx, knownAddressSQL, strings.TrimSpace(email), address).Scan(&known); err != nil {
		return false, fmt.Errorf("read sign-in addresses: %w", err)
	}
	return known, nil
}

// DeleteSession ends the session behind token.
func (s *Store) DeleteSession(ctx context.Context, token string) error {
	if _, err := s.pool.Exec(ctx, deleteSessionSQL, auth.HashToken(token)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
