package handlers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
)

// AccessStore is what people and API keys need from storage; *db.Store
// implements it.
type AccessStore interface {
	// LookupAPIKey returns the live key behind the hash of a secret;
	// domain.ErrNotFound when there is none (revoked, expired, rotated out).
	LookupAPIKey(ctx context.Context, hash string) (auth.APIKey, error)
	// TouchAPIKeys records when keys were last used, batched by the
	// caller (recordKeyUse).
	TouchAPIKeys(ctx context.Context, used map[uuid.UUID]time.Time) error
	// CreateAPIKey stores a new key and returns it with its secret, which
	// is not kept and cannot be read again.
	CreateAPIKey(ctx context.Context, spec auth.KeySpec, createdBy string) (auth.APIKey, string, error)
	// ListAPIKeys returns every key, live ones first, by name.
	ListAPIKeys(ctx context.Context) ([]auth.APIKey, error)
	// RevokeAPIKey ends a key for good; a key revoked before is
	// auth.ErrKeyRevoked.
	RevokeAPIKey(ctx context.Context, id uuid.UUID) (auth.APIKey, error)
	// RotateAPIKey gives a key a new secret and returns it; the old one
	// keeps working for window (zero ends it at once).
	RotateAPIKey(ctx context.Context, id uuid.UUID, window time.Duration) (auth.APIKey, string, error)
	// ListUsers returns every person who may sign in, by email.
	ListUsers(ctx context.Context) ([]auth.User, error)
	// UserByID returns one person; domain.ErrNotFound when there is none.
	UserByID(ctx context.Context, id uuid.UUID) (auth.User, error)
	// AddUser creates a person; an email already taken is a validation
	// error.
	AddUser(ctx context.Context, email, password string, role auth.Role) (auth.User, error)
	// SetUserRole changes a person's role, from their next request on.
	SetUserRole(ctx context.Context, id uuid.UUID, role auth.Role) (auth.User, error)
	// DisableUser stops a person from signing in and ends their sessions.
	DisableUser(ctx context.Context, id uuid.UUID) (auth.User, error)
	// EnableUser lets a disabled person sign in again.
	EnableUser(ctx context.Context, id uuid.UUID) (auth.User, error)
	// RemoveUser deletes a person and their sessions.
	RemoveUser(ctx context.Context, id uuid.UUID) (auth.User, error)
	// ChangePassword changes a signed-in person's own password, given the
	// current one; their sessions but keepToken's end.
	ChangePassword(ctx context.Context, id uuid.UUID, current, next, keepToken string) error
}

// authenticateKey identifies the caller of /api/v1 from X-API-Key: the
// bootstrap key (FLINT_API_KEY, admin, compared in constant time over
// SHA-256 digests so that lengths do not leak) or a stored key, looked up
// by the hash of the secret on every request, so that a revoked key is
// refused from the very next request on, in every process.
func (s *server) authenticateKey(bootstrap string) fiber.Handler {
	want := sha256.Sum256([]byte(bootstrap))
	return func(c *fiber.Ctx) error {
		secret := c.Get("X-API-Key")
		got := sha256.Sum256([]byte(secret))
		if bootstrap != "" && subtle.ConstantTimeCompare(want[:], got[:]) == 1 {
			c.Locals(principalKey, principal{actor: auth.BootstrapActor, source: "api", scopes: []auth.Scope{auth.ScopeAdmin}})
			return c.Next()
		}
		if secret != "" && s.access != nil && strings.HasPrefix(secret, auth.KeySecretPrefix) {
			hash := auth.HashToken(secret)
			k, err := s.access.LookupAPIKey(c.UserContext(), hash)
			if err == nil {
				s.keyUse.note(k, s.clock.Now())
				c.Locals(principalKey, principal{actor: k.Actor(), source: "api", scopes: k.Scopes, keyID: k.ID, keyHash: hash, queues: k.Queues})
				return c.Next()
			}
			if !errors.Is(err, domain.ErrNotFound) {
				return err
			}
		}
		c.Set("WWW-Authenticate", `APIKey header="X-API-Key"`)
		return &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: "missing, wrong, revoked or expired X-API-Key header"}
	}
}

// keyUseEvery is how stale a key's stored last-used time may get before a
// request notes a new one: a key in constant use is written at most about
// once a minute per process, and never on the request path.
const keyUseEvery = time.Minute

// keyUseFlush is how often noted uses are written, in one statement.
var keyUseFlush = 10 * time.Second

// keyUsage collects when keys were used, for a periodic batched write.
type keyUsage struct {
	mu      sync.Mutex
	pending map[uuid.UUID]time.Time
	written map[uuid.UUID]time.Time // what this process last wrote
}

func newKeyUsage() *keyUsage {
	return &keyUsage{pending: map[uuid.UUID]time.Time{}, written: map[uuid.UUID]time.Time{}}
}

// note records a use unless the stored time, or the one this process
// last wrote, is recent enough.
func (u *keyUsage) note(k auth.APIKey, now time.Time) {
	if k.LastUsedAt != nil && now.Sub(*k.LastUsedAt) < keyUseEvery {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if w, ok := u.written[k.ID]; ok && now.Sub(w) < keyUseEvery {
		return
	}
	u.pending[k.ID] = now
}

// take returns the noted uses and starts a new batch.
func (u *keyUsage) take() map[uuid.UUID]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.pending) == 0 {
		return nil
	}
	p := u.pending
	u.pending = map[uuid.UUID]time.Time{}
	if len(u.written) > 10_000 {
		u.written = map[uuid.UUID]time.Time{}
	}
	for id, at := range p {
		u.written[id] = at
	}
	return p
}

// recordKeyUse writes noted key uses every keyUseFlush until ctx ends, and
// once more then.
func (s *server) recordKeyUse(ctx context.Context) {
	t := time.NewTicker(keyUseFlush)
	defer t.Stop()
	flush := func(ctx context.Context) {
		used := s.keyUse.take()
		if used == nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s.access.TouchAPIKeys(ctx, used); err != nil {
			s.logger.WarnContext(ctx, "recording API key use failed", "component", "http", "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush(context.WithoutCancel(ctx))
			return
		case <-t.C:
			flush(ctx)
		}
	}
}
