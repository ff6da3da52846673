package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"

	"github.com/flinthq/flint/jobs"
)

// ErrBadLogin means the email is unknown or the password wrong; callers
// must not say which.
var ErrBadLogin = errors.New("wrong email or password")

// ErrDisabled means the password was right but the account is disabled.
var ErrDisabled = errors.New("this account is disabled; ask an admin to enable it")

// ErrKeyRevoked means an API key was revoked before: revoking it again
// changes nothing.
var ErrKeyRevoked = errors.New("this key is revoked already")

// User is a dashboard user.
type User struct {
	ID          uuid.UUID
	Email       string
	Role        Role
	CreatedAt   time.Time
	LastLoginAt *time.Time
	// DisabledAt is set while the user may not sign in.
	DisabledAt *time.Time
}

// Session is a signed-in browser.
type Session struct {
	// User is the signed-in user, as stored when the session was read.
	User User
	// CSRFToken is the token state-changing requests of this session must
	// carry.
	CSRFToken string
	// ExpiresAt is when the session ends; it is never extended.
	ExpiresAt time.Time
}

// Password policy: bcrypt reads at most 72 bytes, and fewer than 8
// characters is too easy to guess.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 72
)

// BcryptCost is the password hashing cost; tests lower it.
var BcryptCost = bcrypt.DefaultCost

// CheckPassword applies the password policy.
func CheckPassword(password string) error {
	if len(password) < MinPasswordLen {
		return jobs.Invalid("password", "must be at least %d characters", MinPasswordLen)
	}
	if len(password) > MaxPasswordLen {
		return jobs.Invalid("password", "must be at most %d bytes", MaxPasswordLen)
	}
	return nil
}

// HashPassword checks password against the policy and returns its bcrypt
// hash.
func HashPassword(password string) (string, error) {
	if err := CheckPassword(password); err != nil {
		return "", err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), BcryptCost)
	if err != nil {
		return "", err
	}
	return string(hash), nil
}

// dummyHash is compared against when the email is unknown, so that a wrong
// email costs as much time as a wrong password: the bcrypt hash, at
// bcrypt.DefaultCost, of a password nobody has. Written out rather than
// made at start-up, which cost every flint process (every command, every
// worker started) about 70 ms of CPU before it did anything.
// TestDummyHashCost holds its cost to the default.
var dummyHash = []byte("$2a$10$mbbE1vO4Nze98HbP/H8Tru0gizGYrqhmis/F2TqIU2EfaS4dXVl/K")

// VerifyPassword reports ErrBadLogin unless password matches hash. An empty
// hash (no such user) is compared against a dummy at the same cost, so the
// answer takes as long either way.
func VerifyPassword(hash, password string) error {
	if hash == "" {
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return ErrBadLogin
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil {
		return ErrBadLogin
	}
	return nil
}

// HashToken is how a session token is stored: a leaked sessions table does
// not sign anybody in.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}
