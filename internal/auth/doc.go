// Package auth holds what Flint knows about who may do what: the people
// who sign in to the dashboard (users, sessions, roles, the password
// policy), the services that call the API (API keys and their scopes), the
// scopes themselves and what implies what (Grants), and how passwords,
// session tokens and key secrets are stored. It has no storage of its own;
// db keeps users, sessions and keys in PostgreSQL through the functions
// here, and handlers checks them on every request against its access table.
//
// auth imports jobs (for its validation error type) and no adapter.
//
// # Where to start reading
//
// access.go is who may do what: the scopes, the roles and what each
// grants (Grants, Role.Scopes), and API keys; auth.go is users, sessions
// and how passwords and tokens are hashed and checked; strength.go is what
// production configuration is held to (`flint secret`'s format, and
// zxcvbn's estimate for keys and passwords it did not make).
package auth
