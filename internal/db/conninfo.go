package db

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Every connection Flint makes to PostgreSQL (the store's pool, the
// listener's LISTEN session, the migrator, the commands) reads its
// connection string with one parser, pgx's, which accepts what libpq
// accepts: URLs and keyword/value strings, several hosts
// (postgres://u@db1:5432,db2:5432/flint), target_session_attrs,
// connect_timeout, sslmode and the rest, PGPASSFILE and PGSERVICE.

// ParseConnConfig reads a PostgreSQL connection string the way the store's
// pool does. name is the setting it came from (DATABASE_URL), used in the
// error; a malformed string is an error naming the problem, never echoing
// the password.
func ParseConnConfig(name, connString string) (*pgx.ConnConfig, error) {
	if i := strings.Index(connString, "://"); i > 0 && !strings.Contains(connString[:i], " ") {
		if scheme := connString[:i]; scheme != "postgres" && scheme != "postgresql" {
			return nil, fmt.Errorf("%s: the scheme is %q, not postgres; %s", name, scheme, connStringHelp)
		}
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, connStringError(name, connString, err)
	}
	cfg.ValidateConnect = requireWritable(cfg.ValidateConnect)
	guardConnConfig(&cfg.Config) // db/netfaults.go
	cfg.Tracer = statementDeadline{}
	return cfg, nil
}

// CheckConnString reports whether connString can be parsed (see
// ParseConnConfig), for settings checked at start.
func CheckConnString(name, connString string) error {
	_, err := ParseConnConfig(name, connString)
	return err
}

// connStringError says what is wrong with connString without repeating it,
// so that no password can leak into logs.
func connStringError(name, connString string, err error) error {
	msg := err.Error()
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		// "cannot parse `<string>`: <problem>": keep the problem.
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+3:]
		}
	}
	for _, secret := range passwordsIn(connString) {
		msg = strings.ReplaceAll(msg, secret, "xxxxx")
	}
	return fmt.Errorf("%s: %s; %s", name, msg, connStringHelp)
}

const connStringHelp = "want postgres://user:password@host:port/database?options, several hosts as host1:port1,host2:port2, or keyword=value pairs, as libpq accepts"

var (
	userinfoPassword = regexp.MustCompile(`^[a-zA-Z]+://[^/?#@:]*:([^@]*)@`)
	keywordPassword  = regexp.MustCompile(`(?:^|[\s&?])(?:ssl)?password=('(?:[^'\\]|\\.)*'|[^\s&]*)`)
)

// passwordsIn finds what looks like a password in a connection string.
func passwordsIn(connString string) []string {
	var out []string
	if m := userinfoPassword.FindStringSubmatch(connString); m != nil && m[1] != "" {
		out = append(out, m[1])
	}
	for _, m := range keywordPassword.FindAllStringSubmatch(connString, -1) {
		if p := strings.Trim(m[1], "'"); p != "" {
			out = append(out, m[1], p)
		}
	}
	return out
}

// serverDescription names the server a connection landed on, for logs and
// readiness: "host:port".
func serverDescription(pc *pgconn.PgConn) string {
	if pc == nil {
		return ""
	}
	addr := pc.Conn().RemoteAddr()
	if addr == nil {
		return ""
	}
	return addr.String()
}
