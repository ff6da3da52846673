package views

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"flint/auth"
)

// scopesKey carries the signed-in person's scopes on the render context.
type scopesKey struct{}

// WithScopes returns ctx carrying the scopes of whoever the page is for;
// templates show only the controls those scopes allow (the server refuses
// the rest regardless).
func WithScopes(ctx context.Context, scopes []auth.Scope) context.Context {
	return context.WithValue(ctx, scopesKey{}, scopes)
}

// Can reports whether the page's viewer may use what needs scope. Without
// scopes on the context it shows nothing that needs any.
func Can(ctx context.Context, need auth.Scope) bool {
	scopes, _ := ctx.Value(scopesKey{}).([]auth.Scope)
	return auth.Grants(scopes, need)
}

// canOperate, canEnqueue and canAdmin are Can for the templates.
func canOperate(ctx context.Context) bool { return Can(ctx, auth.ScopeOperate) }
func canEnqueue(ctx context.Context) bool { return Can(ctx, auth.ScopeEnqueue) }
func canAdmin(ctx context.Context) bool   { return Can(ctx, auth.ScopeAdmin) }

// UsersView is the Users page: every person, the add form and, after an
// add without a password, the generated one (shown once).
type UsersView struct {
	Users []auth.User
	// Me is the signed-in admin, who cannot disable or remove themself here.
	Me   uuid.UUID
	Form UserForm
	// Created is set right after adding a user with a generated password.
	Created *CreatedUser
	// Notice confirms the last change.
	Notice string
	Now    time.Time
}

// UserForm is the add-a-user form with its values and errors.
type UserForm struct {
	Email, Role string
	Errors      map[string]string
	Message     string
}

// CreatedUser is a new user's generated password, shown once.
type CreatedUser struct {
	Email, Password string
}

// KeysView is the Keys page: every API key, the create form and, after a
// create or rotate, the secret (shown once).
type KeysView struct {
	Keys   []auth.APIKey
	Form   KeyForm
	Secret *ShownSecret
	Notice string
	Now    time.Time
}

// KeyForm is the create-a-key form with its values and errors.
type KeyForm struct {
	Name    string
	Scopes  []string
	Errors  map[string]string
	Message string
}

// ShownSecret is a key's secret right after it was created or rotated.
type ShownSecret struct {
	Name, Secret string
	// OldValidUntil is, after a rotation, when the replaced secret stops
	// working.
	OldValidUntil *time.Time
}

// AccountForm is the change-your-password form.
type AccountForm struct {
	Email   string
	Role    string
	Errors  map[string]string
	Message string
	Saved   bool
}

// roleHints says what each role may do, for the Users page.
var roleHints = map[auth.Role]string{
	auth.RoleViewer:   "reads everything, changes nothing",
	auth.RoleOperator: "also retries, cancels, replays, creates jobs, pauses and resumes",
	auth.RoleAdmin:    "also settings, people, keys and purging",
}

// scopeHints says what each scope allows, for the Keys page.
var scopeHints = map[auth.Scope]string{
	auth.ScopeEnqueue: "create jobs and workflows only",
	auth.ScopeRead:    "read jobs, queues, workers, settings, logs, audit",
	auth.ScopeOperate: "retry, cancel, replay, bin and restore, pause and resume (includes read)",
	auth.ScopeAdmin:   "everything, including settings, keys and purging",
}

func scopeList(scopes []auth.Scope) string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}
