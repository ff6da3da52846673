package auth

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/jobs"
)

// Scope is one kind of access. Every route needs exactly one (the table in
// handlers/access.go says which); an API key holds a set of scopes and a
// person's role stands for a fixed set.
type Scope string

// The scopes, least to most powerful.
const (
	// ScopeEnqueue creates jobs and workflows, and nothing else: what a
	// service that only submits work needs.
	ScopeEnqueue Scope = "enqueue"
	// ScopeWork runs jobs: a pull worker registers, claims jobs,
	// heartbeats, logs and finishes them through it, and nothing else. A
	// key with it may be limited to some queues (APIKey.Queues).
	ScopeWork Scope = "work"
	// ScopeRead reads everything: jobs, queues, workers, settings, logs,
	// the audit trail.
	ScopeRead Scope = "read"
	// ScopeOperate acts on jobs and queues: retry, cancel, replay,
	// edit-and-replay, move to the bin and restore, pause and resume.
	// It implies ScopeRead.
	ScopeOperate Scope = "operate"
	// ScopeAdmin changes settings, people and keys, and purges. It
	// implies every other scope.
	ScopeAdmin Scope = "admin"
)

// Scopes lists every scope, in order of power.
var Scopes = []Scope{ScopeEnqueue, ScopeWork, ScopeRead, ScopeOperate, ScopeAdmin}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return slices.Contains(Scopes, s) }

// Role is what a person may do on the dashboard.
type Role string

// The roles.
const (
	// RoleViewer reads everything and changes nothing.
	RoleViewer Role = "viewer"
	// RoleOperator also retries, cancels, replays, edits and replays,
	// bins and restores jobs, creates jobs, and pauses and resumes.
	RoleOperator Role = "operator"
	// RoleAdmin also changes settings, people and keys, and purges. The
	// bootstrap account from the environment is an admin.
	RoleAdmin Role = "admin"
)

// Roles lists every role, least to most powerful.
var Roles = []Role{RoleViewer, RoleOperator, RoleAdmin}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Scopes is the set of scopes the role stands for.
func (r Role) Scopes() []Scope {
	switch r {
	case RoleViewer:
		return []Scope{ScopeRead}
	case RoleOperator:
		return []Scope{ScopeEnqueue, ScopeRead, ScopeOperate}
	case RoleAdmin:
		return []Scope{ScopeAdmin}
	}
	return nil
}

// LeastRole is the least role that grants need.
func LeastRole(need Scope) Role {
	for _, r := range Roles {
		if Grants(r.Scopes(), need) {
			return r
		}
	}
	return RoleAdmin
}

// Grants reports whether holding scopes allows what need allows: admin
// implies everything, operate implies read, and otherwise a scope grants
// only itself.
func Grants(scopes []Scope, need Scope) bool {
	for _, s := range scopes {
		if s == need || s == ScopeAdmin || (s == ScopeOperate && need == ScopeRead) {
			return true
		}
	}
	return false
}

// ParseScopes reads a list of scope names, refusing unknown ones,
// duplicates and an empty list.
func ParseScopes(names []string) ([]Scope, error) {
	if len(names) == 0 {
		return nil, jobs.Invalid("scopes", "give at least one of %s", scopeNames())
	}
	out := make([]Scope, 0, len(names))
	for _, n := range names {
		s := Scope(strings.TrimSpace(n))
		if !s.Valid() {
			return nil, jobs.Invalid("scopes", "%q is not a scope; use %s", n, scopeNames())
		}
		if slices.Contains(out, s) {
			return nil, jobs.Invalid("scopes", "%q is listed twice", n)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Scope) int { return slices.Index(Scopes, a) - slices.Index(Scopes, b) })
	return out, nil
}

func scopeNames() string {
	names := make([]string, len(Scopes))
	for i, s := range Scopes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// APIKey is a service's key, without its secret.
type APIKey struct {
	ID uuid.UUID `json:"id"`
	// Name is unique among keys and shown as the actor "key:<name>".
	Name string `json:"name"`
	// Scopes are what the key may do; see Grants for what implies what.
	Scopes []Scope `json:"scopes"`
	Prefix string  `json:"prefix"` // the secret's first characters, to tell keys apart
	// CreatedBy is the actor that made the key.
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// RotatedAt is when a new secret last replaced the old one, if ever.
	RotatedAt *time.Time `json:"rotated_at"`
	// LastUsedAt is when the key last authenticated a request, if ever;
	// uses are recorded in batches, so it may lag a little.
	LastUsedAt *time.Time `json:"last_used_at"`
	// RevokedAt is set once the key no longer authenticates anything.
	RevokedAt *time.Time `json:"revoked_at"`
	// PreviousExpiresAt is when the secret replaced by the last rotation
	// stops working; nil when none is still valid.
	PreviousExpiresAt *time.Time `json:"previous_expires_at"`
	// Queues limits what the key's work scope may take to these queues;
	// nil means every queue.
	Queues []string `json:"queues"`
}

// KeySpec is what a new key is made of.
type KeySpec struct {
	Name   string  // see CheckKeyName
	Scopes []Scope // at least one, no duplicates
	// Queues limits the work scope to these queues; empty means every
	// queue.
	Queues []string
}

// MaxKeyQueues bounds the queues a key may be limited to.
const MaxKeyQueues = 100

// Check applies the rules for a new key: its name, its scopes (known, no
// duplicates, at least one) and its queues (valid names, no duplicates,
// only with the work scope). It returns the spec with its scopes in
// order.
func (k KeySpec) Check() (KeySpec, error) {
	if err := CheckKeyName(k.Name); err != nil {
		return k, err
	}
	names := make([]string, len(k.Scopes))
	for i, sc := range k.Scopes {
		names[i] = string(sc)
	}
	scopes, err := ParseScopes(names)
	if err != nil {
		return k, err
	}
	k.Scopes = scopes
	if len(k.Queues) == 0 {
		k.Queues = nil
		return k, nil
	}
	if !slices.Contains(k.Scopes, ScopeWork) {
		return k, jobs.Invalid("queues", "limits the work scope; give it with the work scope, or leave it out")
	}
	if len(k.Queues) > MaxKeyQueues {
		return k, jobs.Invalid("queues", "lists %d queues; the limit is %d", len(k.Queues), MaxKeyQueues)
	}
	for i, q := range k.Queues {
		if !jobs.ValidQueue(q) {
			return k, jobs.Invalid(fmt.Sprintf("queues[%d]", i), "%q is not a queue name (1-%d letters, digits or _ . : -)", q, jobs.MaxQueueLen)
		}
		if slices.Contains(k.Queues[:i], q) {
			return k, jobs.Invalid(fmt.Sprintf("queues[%d]", i), "%q is listed twice", q)
		}
	}
	return k, nil
}

// MayWork reports whether the key's work scope reaches queue.
func (k APIKey) MayWork(queue string) bool {
	return k.Queues == nil || slices.Contains(k.Queues, queue)
}

// Actor is how the audit trail names a request made with this key.
func (k APIKey) Actor() string { return "key:" + k.Name }

// BootstrapActor names requests made with FLINT_API_KEY on the audit trail.
const BootstrapActor = "key:FLINT_API_KEY"

// KeySecretPrefix starts every generated key secret, so a leaked one is
// recognisable (secret scanners, logs).
const KeySecretPrefix = "flint_"

// keyPrefixLen is how much of a secret is kept in clear to tell keys
// apart: the marker and 6 random characters, 36 bits, too few to matter.
const keyPrefixLen = len(KeySecretPrefix) + 6

// NewKeySecret returns a new API key secret (256 random bits) and the
// prefix kept to recognise it.
func NewKeySecret() (secret, prefix string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	secret = KeySecretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return secret, secret[:keyPrefixLen]
}

// CheckKeyName applies the rule for key names: 1 to 64 letters, digits,
// dots, dashes or underscores, so that they read cleanly in the audit
// trail.
func CheckKeyName(name string) error {
	if name == "" || len(name) > 64 {
		return jobs.Invalid("name", "must be 1 to 64 characters")
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return jobs.Invalid("name", "may hold only letters, digits, '.', '-' and '_'")
		}
	}
	if strings.EqualFold(name, "FLINT_API_KEY") {
		return jobs.Invalid("name", "FLINT_API_KEY names the bootstrap key; choose another name")
	}
	return nil
}

// RotationWindow bounds how long a replaced secret keeps working.
const (
	DefaultRotationWindow = 24 * time.Hour
	MaxRotationWindow     = 30 * 24 * time.Hour
)

// NewPassword returns a random password that meets the policy (96 random
// bits), for people added without one. About one in two thousand random
// strings holds a run zxcvbn guesses early ("zyx", "1234"), which puts its
// estimate under the policy's floor however random the rest: those are
// drawn again.
func NewPassword() string {
	for {
		var b [12]byte
		_, _ = rand.Read(b[:])
		if pw := base64.RawURLEncoding.EncodeToString(b[:]); CheckPasswordStrength(pw) == nil {
			return pw
		}
	}
}

// CheckEmail is the rule for a user's email: something@something, clean
// text, at most 254 characters.
func CheckEmail(email string) error {
	at := strings.IndexByte(email, '@')
	if at < 1 || at == len(email)-1 || len(email) > 254 || !jobs.CleanText(email) || strings.ContainsAny(email, " \t") {
		return jobs.Invalid("email", "must be an email address")
	}
	return nil
}
