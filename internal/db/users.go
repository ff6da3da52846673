package db

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

const insertUserSQL = `
INSERT INTO users (id, email, password_hash, role) VALUES ($1, $2, $3, $4)
ON CONFLICT (lower(email)) DO NOTHING`

// EnsureUser creates the user with this email and password unless one
// exists; it reports whether it created it.
func (s *Store) EnsureUser(ctx context.Context, email, password string, role auth.Role) (bool, error) {
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
SELECT id, email, role, created_at, last_login_at, disabled_at, password_hash FROM users WHERE lower(email) = lower($1)`

// Authenticate checks an email and password. A disabled user with the
// right password gets auth.ErrDisabled; a wrong password never says
// whether the account exists or is disabled.
func (s *Store) Authenticate(ctx context.Context, email, password string) (auth.User, error) {
	var u auth.User
	var hash string
	err := s.pool.QueryRow(ctx, userByEmailSQL,
		strings.TrimSpace(email)).Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt, &u.LastLoginAt, &u.DisabledAt, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		hash = "" // compared against a dummy: the same cost as a wrong password
	} else if err != nil {
		return auth.User{}, fmt.Errorf("authenticate: %w", err)
	}
	if err := auth.VerifyPassword(hash, password); err != nil {
		return auth.User{}, err
	}
	if u.DisabledAt != nil {
		return auth.User{}, auth.ErrDisabled
	}
	return u, nil
}

const userColumns = `id, email, role, created_at, last_login_at, disabled_at`

func scanUser(row pgx.Row) (auth.User, error) {
	var u auth.User
	err := row.Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt, &u.LastLoginAt, &u.DisabledAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.User{}, fmt.Errorf("no such user: %w", domain.ErrNotFound)
	}
	return u, err
}

const listUsersSQL = `SELECT ` + userColumns + ` FROM users ORDER BY lower(email)`

// ListUsers returns every user, by email.
func (s *Store) ListUsers(ctx context.Context) ([]auth.User, error) {
	rows, err := s.pool.Query(ctx, listUsersSQL)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []auth.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

const (
	userByIDSQL      = `SELECT ` + userColumns + ` FROM users WHERE id = $1`
	userByEmailOnly  = `SELECT ` + userColumns + ` FROM users WHERE lower(email) = lower($1)`
	insertUserRetSQL = `
INSERT INTO users (id, email, password_hash, role) VALUES ($1, $2, $3, $4)
ON CONFLICT (lower(email)) DO NOTHING
RETURNING ` + userColumns
)

// UserByID returns one user, disabled or not, or an error wrapping
// domain.ErrNotFound.
func (s *Store) UserByID(ctx context.Context, id uuid.UUID) (auth.User, error) {
	return scanUser(s.pool.QueryRow(ctx, userByIDSQL, id))
}

// UserByEmail returns one user by email, whatever its case and the
// spaces around it, or an error wrapping domain.ErrNotFound.
func (s *Store) UserByEmail(ctx context.Context, email string) (auth.User, error) {
	return scanUser(s.pool.QueryRow(ctx, userByEmailOnly, strings.TrimSpace(email)))
}

// AddUser creates a user; an email already taken is a validation error.
func (s *Store) AddUser(ctx context.Context, email, password string, role auth.Role) (auth.User, error) {
	email = strings.TrimSpace(email)
	if err := auth.CheckEmail(email); err != nil {
		return auth.User{}, err
	}
	if !role.Valid() {
		return auth.User{}, jobs.Invalid("role", "must be viewer, operator or admin")
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		return auth.User{}, err // the policy's validation error, or bcrypt's
	}
	id, err := uuid.NewV7()
	if err != nil {
		return auth.User{}, err
	}
	u, err := scanUser(s.pool.QueryRow(ctx, insertUserRetSQL, id, email, hash, role))
	if errors.Is(err, domain.ErrNotFound) {
		return auth.User{}, jobs.Invalid("email", "a user with this email exists")
	}
	if err != nil {
		return auth.User{}, fmt.Errorf("add user: %w", err)
	}
	return u, nil
}

// lockAdminsSQL locks every enabled admin, so that two concurrent changes
// cannot each leave the other the last admin and then remove it: the
// second waits, then re-reads the rows as the first left them.
const lockAdminsSQL = `SELECT id FROM users WHERE role = 'admin' AND disabled_at IS NULL ORDER BY id FOR UPDATE`

// errLastAdmin refuses a change that would leave nobody able to manage
// people, keys and settings.
var errLastAdmin = jobs.Invalid("role", "this is the last enabled admin; make another user an admin first")

// withAdminsLocked runs fn in a transaction after locking the enabled
// admins, and refuses the change when fn reports it would remove the last.
func (s *Store) withAdminsLocked(ctx context.Context, fn func(tx pgx.Tx, admins []uuid.UUID) error) error {
	return s.withTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, lockAdminsSQL)
		if err != nil {
			return err
		}
		admins, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		return fn(tx, admins)
	})
}

// wouldLeaveNoAdmin reports whether taking id out of the enabled admins
// leaves none.
func wouldLeaveNoAdmin(admins []uuid.UUID, id uuid.UUID) bool {
	return len(admins) == 1 && admins[0] == id
}

const (
	setRoleSQL          = `UPDATE users SET role = $2 WHERE id = $1 RETURNING ` + userColumns
	disableUserSQL      = `UPDATE users SET disabled_at = coalesce(disabled_at, now()) WHERE id = $1 RETURNING ` + userColumns
	enableUserSQL       = `UPDATE users SET disabled_at = NULL WHERE id = $1 RETURNING ` + userColumns
	deleteUserSQL       = `DELETE FROM users WHERE id = $1 RETURNING ` + userColumns
	deleteSessionsOfSQL = `DELETE FROM sessions WHERE user_id = $1 AND id <> $2`
	setPasswordSQL      = `UPDATE users SET password_hash = $2, password_changed_at = now() WHERE id = $1 RETURNING ` + userColumns
	passwordHashSQL     = `SELECT password_hash FROM users WHERE id = $1`
)

// SetUserRole changes a user's role; it applies from their next request.
func (s *Store) SetUserRole(ctx context.Context, id uuid.UUID, role auth.Role) (auth.User, error) {
	if !role.Valid() {
		return auth.User{}, jobs.Invalid("role", "must be viewer, operator or admin")
	}
	var u auth.User
	err := s.withAdminsLocked(ctx, func(tx pgx.Tx, admins []uuid.UUID) error {
		if role != auth.RoleAdmin && wouldLeaveNoAdmin(admins, id) {
			return errLastAdmin
		}
		var err error
		u, err = scanUser(tx.QueryRow(ctx, setRoleSQL, id, role))
		return err
	})
	if err != nil {
		return auth.User{}, fmt.Errorf("set role: %w", err)
	}
	return u, nil
}

// DisableUser stops a user from signing in and ends every session they
// have, in one transaction: their open dashboards fail on their next
// request.
func (s *Store) DisableUser(ctx context.Context, id uuid.UUID) (auth.User, error) {
	var u auth.User
	err := s.withAdminsLocked(ctx, func(tx pgx.Tx, admins []uuid.UUID) error {
		if wouldLeaveNoAdmin(admins, id) {
			return errLastAdmin
		}
		var err error
		if u, err = scanUser(tx.QueryRow(ctx, disableUserSQL, id)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, deleteSessionsOfSQL, id, "")
		return err
	})
	if err != nil {
		return auth.User{}, fmt.Errorf("disable user: %w", err)
	}
	return u, nil
}

// EnableUser lets a disabled user sign in again.
func (s *Store) EnableUser(ctx context.Context, id uuid.UUID) (auth.User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, enableUserSQL, id))
	if err != nil {
		return auth.User{}, fmt.Errorf("enable user: %w", err)
	}
	return u, nil
}

// RemoveUser deletes a user and (by the foreign key) their sessions. The
// audit trail keeps their email as it was.
func (s *Store) RemoveUser(ctx context.Context, id uuid.UUID) (auth.User, error) {
	var u auth.User
	err := s.withAdminsLocked(ctx, func(tx pgx.Tx, admins []uuid.UUID) error {
		if wouldLeaveNoAdmin(admins, id) {
			return errLastAdmin
		}
		var err error
		u, err = scanUser(tx.QueryRow(ctx, deleteUserSQL, id))
		return err
	})
	if err != nil {
		return auth.User{}, fmt.Errorf("remove user: %w", err)
	}
	return u, nil
}

// SetPassword replaces a user's password and ends their sessions except the
// one behind keepToken ("" ends all): the CLI's reset for a locked-out
// admin, and the last step of changing one's own password.
func (s *Store) SetPassword(ctx context.Context, id uuid.UUID, password, keepToken string) (auth.User, error) {
	hash, err := auth.HashPassword(password)
	if err != nil {
		return auth.User{}, err
	}
	keep := ""
	if keepToken != "" {
		keep = auth.HashToken(keepToken)
	}
	var u auth.User
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if u, err = scanUser(tx.QueryRow(ctx, setPasswordSQL, id, hash)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, deleteSessionsOfSQL, id, keep)
		return err
	})
	if err != nil {
		return auth.User{}, fmt.Errorf("set password: %w", err)
	}
	return u, nil
}

// ChangePassword is a signed-in user changing their own password: the
// current one must be right. Their other sessions end; this one stays.
func (s *Store) ChangePassword(ctx context.Context, id uuid.UUID, current, next, keepToken string) error {
	var hash string
	if err := s.pool.QueryRow(ctx, passwordHashSQL, id).Scan(&hash); err != nil {
		return fmt.Errorf("change password: %w", err)
	}
	if auth.VerifyPassword(hash, current) != nil {
		return jobs.Invalid("current_password", "is not your current password")
	}
	if current == next {
		return jobs.Invalid("new_password", "must differ from the current one")
	}
	_, err := s.SetPassword(ctx, id, next, keepToken)
	return err
}
