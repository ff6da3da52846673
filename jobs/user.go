package jobs

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// ErrBadLogin means the email is unknown or the password wrong; callers
// must not say which.
var ErrBadLogin = errors.New("wrong email or password")

// User is a dashboard user.
type User struct {
	ID          uuid.UUID
	Email       string
	Role        string
	CreatedAt   time.Time
	LastLoginAt *time.Time
}

// Session is a signed-in browser.
type Session struct {
	User      User
	CSRFToken string
	ExpiresAt time.Time
}
