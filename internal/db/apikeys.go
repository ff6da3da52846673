package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// API keys: one row per calling service, holding the SHA-256 of its secret
// (auth.HashToken) and, for a rotation window, the hash of the secret it
// replaced.

const apiKeyColumns = `id, name, scopes, prefix, created_by, created_at, rotated_at, last_used_at, revoked_at,
	CASE WHEN prev_expires_at > now() THEN prev_expires_at END, queues`

func scanAPIKey(row pgx.Row) (auth.APIKey, error) {
	var k auth.APIKey
	var scopes []string
	err := row.Scan(&k.ID, &k.Name, &scopes, &k.Prefix, &k.CreatedBy, &k.CreatedAt, &k.RotatedAt, &k.LastUsedAt, &k.RevokedAt, &k.PreviousExpiresAt, &k.Queues)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.APIKey{}, fmt.Errorf("no such API key: %w", domain.ErrNotFound)
	}
	if err != nil {
		return auth.APIKey{}, err
	}
	k.Scopes = make([]auth.Scope, len(scopes))
	for i, s := range scopes {
		k.Scopes[i] = auth.Scope(s)
	}
	return k, nil
}

const insertAPIKeySQL = `
INSERT INTO api_keys (id, name, scopes, hash, prefix, created_by, queues) VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING ` + apiKeyColumns

// CreateAPIKey stores a new key and returns it with its secret, which is
// not kept and cannot be read again.
func (s *Store) CreateAPIKey(ctx context.Context, spec auth.KeySpec, createdBy string) (auth.APIKey, string, error) {
	spec.Name = strings.TrimSpace(spec.Name)
	spec, err := spec.Check()
	if err != nil {
		return auth.APIKey{}, "", err
	}
	name := spec.Name
	id, err := uuid.NewV7()
	if err != nil {
		return auth.APIKey{}, "", err
	}
	secret, prefix := auth.NewKeySecret()
	k, err := scanAPIKey(s.pool.QueryRow(ctx, insertAPIKeySQL, id, name, scopeStrings(spec.Scopes), auth.HashToken(secret), prefix, truncate(createdBy, 300), spec.Queues))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "api_keys_name_idx" {
		return auth.APIKey{}, "", jobs.Invalid("name", "a key named %q exists (revoked keys keep their names); choose another", name)
	}
	if err != nil {
		return auth.APIKey{}, "", fmt.Errorf("create API key: %w", err)
	}
	return k, secret, nil
}

func scopeStrings(scopes []auth.Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}

const listAPIKeysSQL = `SELECT ` + apiKeyColumns + ` FROM api_keys ORDER BY revoked_at IS NOT NULL, lower(name)`

// ListAPIKeys returns every key, live ones first, by name.
func (s *Store) ListAPIKeys(ctx context.Context) ([]auth.APIKey, error) {
	rows, err := s.pool.Query(ctx, listAPIKeysSQL)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	defer rows.Close()
	var out []auth.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list API keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return out, nil
}

// lookupAPIKeySQL finds the live key whose current secret, or whose
// replaced secret still inside its rotation window, hashes to $1. Both
// branches are unique-index reads; this runs on every API request made
// with a key, so that a revocation applies to the very next one.
const lookupAPIKeySQL = `
SELECT ` + apiKeyColumns + ` FROM api_keys
WHERE revoked_at IS NULL AND (hash = $1 OR (prev_hash = $1 AND prev_expires_at > now()))
LIMIT 1`

// LookupAPIKey returns the live key behind a secret's hash, or
// domain.ErrNotFound.
func (s *Store) LookupAPIKey(ctx context.Context, hash string) (auth.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, lookupAPIKeySQL, hash))
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return auth.APIKey{}, fmt.Errorf("look up API key: %w", err)
	}
	return k, err
}

const revokeAPIKeySQL = `
UPDATE api_keys SET revoked_at = now(), prev_hash = NULL, prev_expires_at = NULL
WHERE id = $1 AND revoked_at IS NULL RETURNING ` + apiKeyColumns

// RevokeAPIKey ends a key (and any secret it replaced) for good. A key
// revoked before is auth.ErrKeyRevoked, and changes nothing: of two
// concurrent revocations, one revokes and the other gets the error.
func (s *Store) RevokeAPIKey(ctx context.Context, id uuid.UUID) (auth.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, revokeAPIKeySQL, id))
	if errors.Is(err, domain.ErrNotFound) {
		// Either there is no such key or it is revoked; say which.
		if _, gerr := scanAPIKey(s.pool.QueryRow(ctx, apiKeyByIDSQL, id)); gerr == nil {
			err = auth.ErrKeyRevoked
		}
	}
	if err != nil {
		return auth.APIKey{}, fmt.Errorf("revoke API key: %w", err)
	}
	return k, nil
}

// rotateAPIKeySQL gives a live key a new secret; the old one stays valid
// for the window ($4 seconds). A second rotation inside the window ends
// the first old secret at once: only one previous secret is ever valid.
const rotateAPIKeySQL = `
UPDATE api_keys SET prev_hash = hash, prev_expires_at = now() + $4 * interval '1 second',
	hash = $2, prefix = $3, rotated_at = now()
WHERE id = $1 AND revoked_at IS NULL
RETURNING ` + apiKeyColumns

const apiKeyByIDSQL = `SELECT ` + apiKeyColumns + ` FROM api_keys WHERE id = $1`

// RotateAPIKey gives a key a new secret and returns it; the old secret keeps
// working for window (0 ends it at once).
func (s *Store) RotateAPIKey(ctx context.Context, id uuid.UUID, window time.Duration) (auth.APIKey, string, error) {
	if window < 0 || window > auth.MaxRotationWindow {
		return auth.APIKey{}, "", jobs.Invalid("window_seconds", "must be between 0 and %d", int(auth.MaxRotationWindow.Seconds()))
	}
	secret, prefix := auth.NewKeySecret()
	k, err := scanAPIKey(s.pool.QueryRow(ctx, rotateAPIKeySQL, id, auth.HashToken(secret), prefix, window.Seconds()))
	if errors.Is(err, domain.ErrNotFound) {
		// Either there is no such key or it is revoked; say which.
		if _, gerr := scanAPIKey(s.pool.QueryRow(ctx, apiKeyByIDSQL, id)); gerr == nil {
			return auth.APIKey{}, "", jobs.Invalid("id", "this key is revoked; create a new one")
		}
	}
	if err != nil {
		return auth.APIKey{}, "", fmt.Errorf("rotate API key: %w", err)
	}
	return k, secret, nil
}

// touchAPIKeysSQL records when keys were last used, one statement for every
// key used since the last flush; a time never moves backwards.
const touchAPIKeysSQL = `
UPDATE api_keys k SET last_used_at = t.at
FROM unnest($1::uuid[], $2::timestamptz[]) AS t(id, at)
WHERE k.id = t.id AND (k.last_used_at IS NULL OR k.last_used_at < t.at)`

// TouchAPIKeys records last-used times, batched by the caller.
func (s *Store) TouchAPIKeys(ctx context.Context, used map[uuid.UUID]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, 0, len(used))
	ats := make([]time.Time, 0, len(used))
	for id, at := range used {
		ids = append(ids, id)
		ats = append(ats, at)
	}
	if _, err := s.pool.Exec(ctx, touchAPIKeysSQL, ids, ats); err != nil {
		return fmt.Errorf("record API key use: %w", err)
	}
	return nil
}
