package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/auth"
	"flint/jobs"
)

const insertUserSQL = `
INSERT INTO users (id, email, password_hash, role) VALUES ($1, $2, $3, $4)
ON CONFLICT (lower(email)) DO NOTHING`

// EnsureUser creates the user with this email and password unless one
// exists; it reports whether it created it.
func (s *Store) EnsureUser(ctx context.Context, email, password, role string) (bool, error) {
	email = strings.TrimSpace(email)
	hash, err := auth.HashPassword(password)
	var invalid *jobs.ValidationError
	if errors.As(err, &invalid) {
		return false, err
	}
	if err != nil {
		return false, fmt.Errorf("hash password: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, insertUserSQL, id, email, hash, role)
	if err != nil {
		return false, fmt.Errorf("create user: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

const userByEmailSQL = `
SELECT id, email, role, created_at, last_login_at, password_hash FROM users WHERE lower(email) = lower($1)`

// Authenticate checks an email and password.
func (s *Store) Authenticate(ctx context.Context, email, password string) (auth.User, error) {
	var u auth.User
	var hash string
	err := s.pool.QueryRow(ctx, userByEmailSQL,
		strings.TrimSpace(email)).Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt, &u.LastLoginAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		hash = "" // compared against a dummy: the same cost as a wrong password
	} else if err != nil {
		return auth.User{}, fmt.Errorf("authenticate: %w", err)
	}
	if err := auth.VerifyPassword(hash, password); err != nil {
		return auth.User{}, err
	}
	return u, nil
}

const (
	insertSessionSQL = `
INSERT INTO sessions (id, user_id, csrf_token, expires_at, ip, user_agent)
VALUES ($1, $2, $3, now() + $4 * interval '1 second', $5, $6)`
	touchLoginSQL            = `UPDATE users SET last_login_at = now() WHERE id = $1`
	deleteExpiredSessionsSQL = `DELETE FROM sessions WHERE expires_at < now()`
	deleteSessionSQL         = `DELETE FROM sessions WHERE id = $1`
)

// CreateSession stores a new session for the user behind token, valid for
// ttl, and records the login.
func (s *Store) CreateSession(ctx context.Context, userID uuid.UUID, token, csrf string, ttl time.Duration, ip, userAgent string) error {
	if len(userAgent) > 300 {
		userAgent = userAgent[:300]
	}
	userAgent = strings.ToValidUTF8(strings.ReplaceAll(userAgent, "\x00", ""), "")
	b := &pgx.Batch{}
	b.Queue(insertSessionSQL,
		auth.HashToken(token), userID, csrf, ttl.Seconds(), ip, userAgent)
	b.Queue(touchLoginSQL, userID)
	b.Queue(deleteExpiredSessionsSQL)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// getSessionSQL reads a live session; last_seen_at is written at most once
// a minute, so that the requests of an open dashboard (live swaps every
// second) are reads.
const getSessionSQL = `
WITH live AS (
	SELECT s.id, s.last_seen_at, u.id AS user_id, u.email, u.role, u.created_at, u.last_login_at, s.csrf_token, s.expires_at
	FROM sessions s JOIN users u ON u.id = s.user_id
	WHERE s.id = $1 AND s.expires_at > now()
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
		return auth.Session{}, jobs.ErrNotFound
	}
	if err != nil {
		return auth.Session{}, fmt.Errorf("get session: %w", err)
	}
	return sess, nil
}

// DeleteSession ends the session behind token.
func (s *Store) DeleteSession(ctx context.Context, token string) error {
	if _, err := s.pool.Exec(ctx, deleteSessionSQL, auth.HashToken(token)); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}
