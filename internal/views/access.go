package views

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
)

// Access is what the page's viewer may use, as the server's access table
// (accessTable in handlers/access.go) says: templates ask it about the
// route a control leads to, so that what a page shows cannot drift from
// what the server allows. Routes are named as the table names them:
// "POST /jobs/:id/retry". A test checks that every route named in views
// is in the table.
type Access interface {
	// Can reports whether the viewer may use route; value is the value
	// of the form field that raises the route's need (the bulk routes'
	// action=purge), or "". A route not in the table is refused.
	Can(route, value string) bool
	// Needs is the least role that may use route.
	Needs(route string) auth.Role
}

// accessKey carries the viewer's Access on the render context.
type accessKey struct{}

// WithAccess returns ctx carrying what the page's viewer may use;
// templates show only those controls (the server refuses the rest
// regardless).
func WithAccess(ctx context.Context, a Access) context.Context {
	return context.WithValue(ctx, accessKey{}, a)
}

// Can reports whether the page's viewer may use route ("POST /benchmark").
// Without Access on the context it shows nothing.
func Can(ctx context.Context, route string) bool { return CanWith(ctx, route, "") }

// CanWith is Can for a route whose need depends on a field's value:
// CanWith(ctx, "POST /bin/bulk", "purge").
func CanWith(ctx context.Context, route, value string) bool {
	a, _ := ctx.Value(accessKey{}).(Access)
	return a != nil && a.Can(route, value)
}

// needs names the least role that may use route, for a page that says why
// a control is missing.
func needs(ctx context.Context, route string) string {
	if a, _ := ctx.Value(accessKey{}).(Access); a != nil {
		return string(a.Needs(route))
	}
	return string(auth.RoleAdmin)
}

// canBulk reports whether the viewer may act on a list's jobs in bulk,
// which is what the list's checkboxes are for.
func canBulk(ctx context.Context, kind string) bool {
	switch kind {
	case "jobs":
		return Can(ctx, "POST /jobs/bulk")
	case "dlq":
		return Can(ctx, "POST /dlq/bulk")
	case "bin":
		return Can(ctx, "POST /bin/bulk")
	}
	return false
}

// UsersView is the Users page: every person, the add form and, after an
// add without a password, the generated one (shown once).
type UsersView struct {
	Users []auth.User // everyone, enabled or not
	// Me is the signed-in admin, who cannot disable or remove themself here.
	Me   uuid.UUID
	Form UserForm // the add form, as typed when refused
	// Created is set right after adding a user with a generated password.
	Created *CreatedUser
	// Notice confirms the last change.
	Notice string
	Now    time.Time // the page's render time, for "last sign-in"
}

// UserForm is the add-a-user form with its values and errors.
type UserForm struct {
	Email, Role string
	Errors      map[string]string // by field name
	Message     string            // an error not tied to a field
}

// CreatedUser is a new user's generated password, shown once.
type CreatedUser struct {
	Email, Password string
}

// KeysView is the Keys page: every API key, the create form and, after a
// create or rotate, the secret (shown once).
type KeysView struct {
	Keys   []auth.APIKey
	Form   KeyForm      // the create form, as typed when refused
	Secret *ShownSecret // set right after a create or rotate
	Notice string       // confirms the last change
	Now    time.Time    // the page's render time, for "created" and "last used"
}

// KeyForm is the create-a-key form with its values and errors.
type KeyForm struct {
	Name    string
	Scopes  []string // the scopes ticked
	Queues  string   // comma-separated, as typed
	Errors  map[string]string
	Message string // an error not tied to a field
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
	Email   string            // the signed-in person's, not editable
	Role    string            // theirs, not editable
	Errors  map[string]string // by field name
	Message string            // an error not tied to a field
	Saved   bool              // the password was just changed
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
	auth.ScopeWork:    "run jobs as a pull worker (register, claim, heartbeat, finish, log)",
	auth.ScopeRead:    "read jobs, queues, workers, settings, logs, audit",
	auth.ScopeOperate: "retry, cancel, replay, bin and restore, pause and resume (includes read)",
	auth.ScopeAdmin:   "everything, including settings, keys and purging",
}

// keyScopes shows a key's scopes, with the queues its work scope is
// limited to.
func keyScopes(k auth.APIKey) string {
	s := scopeList(k.Scopes)
	if k.Queues != nil {
		s += " (work: " + strings.Join(k.Queues, ", ") + ")"
	}
	return s
}

func scopeList(scopes []auth.Scope) string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return strings.Join(out, ", ")
}

// diskFullKey marks the render context of a page shown while the
// database's disk is full.
type diskFullKey struct{}

// WithDiskFull returns ctx marking the page as shown while the database
// server's disk is full, so that Base puts a banner naming the cause
// above it.
func WithDiskFull(ctx context.Context) context.Context {
	return context.WithValue(ctx, diskFullKey{}, true)
}

// diskFull reports whether ctx was marked by WithDiskFull.
func diskFull(ctx context.Context) bool {
	v, _ := ctx.Value(diskFullKey{}).(bool)
	return v
}
