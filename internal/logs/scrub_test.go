package logs

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/syncbuf"
)

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	secret := []string{
		"password", "PASSWORD", "db_password", "smtpPassword", "smtp_password", "passwd",
		"secret", "client_secret", "token", "access_token", "refreshToken",
		"api_key", "apikey", "api-key", "apiKey", "X-Api-Key", "x-api-key",
		"authorization", "Authorization", "auth", "basic_auth", "auth_header",
		"cookie", "Set-Cookie", "session", "session_id", "csrf", "csrf_token",
		"private_key", "privateKey", "credential", "credentials", "smtp_pass", "pwd",
	}
	for _, k := range secret {
		require.True(t, IsSecretKey(k), k)
	}
	// The fixed keys of the codebase and ordinary words must survive.
	plain := []string{
		"job_id", "type", "queue", "worker_id", "component", "error", "duration_ms",
		"attempt", "request_id", "role", "msg", "level", "time", "author", "authority",
		"passenger_count", "url", "host", "user", "username", "status", "payload", "",
	}
	for _, k := range plain {
		require.False(t, IsSecretKey(k), k)
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, secret string
		keep       []string
	}{
		{"connect postgres://flint:hunter2pw@db.internal:5432/flint failed", "hunter2pw",
			[]string{"postgres://flint:[REDACTED]@db.internal:5432/flint", "failed"}},
		{"dial redis://:r3dispass@cache:6379/0", "r3dispass", []string{"redis://:[REDACTED]@cache:6379/0"}},
		{"dsn postgres://u:p@ss@host/db", "p@ss", []string{"postgres://u:[REDACTED]@host/db"}},
		{"Authorization: Bearer eyJhbGciOi.J9xyzSECRET", "eyJhbGciOi", []string{"Authorization: [REDACTED]"}},
		{"sent header bearer abcDEF123secret to upstream", "abcDEF123secret", []string{"sent header bearer [REDACTED] to upstream"}},
		{"got Basic dXNlcjpwYXNzd29yZA== back", "dXNlcjpwYXNzd29yZA", []string{"got Basic [REDACTED] back"}},
		{"login user=bob password=s3cr3tpw host=x", "s3cr3tpw", []string{"user=bob", "password=[REDACTED]", "host=x"}},
		{"smtp_pass=mailpw123 port=587", "mailpw123", []string{"smtp_pass=[REDACTED]", "port=587"}},
		{`request {"api_key":"ak_live_123","n":1}`, "ak_live_123", []string{`"api_key":"[REDACTED]"`, `"n":1`}},
		{`escaped {\"token\":\"tok_9999\",\"a\":2}`, "tok_9999", []string{`\"token\":\"[REDACTED]\"`, `\"a\":2`}},
		{"X-Api-Key: key-abc-999, next", "key-abc-999", []string{"X-Api-Key: [REDACTED]", ", next"}},
		{"cookie='sess=abc123cookie'", "abc123cookie", []string{"cookie='[REDACTED]'"}},
	}
	for _, c := range cases {
		got := Scrub(c.in)
		require.NotContains(t, got, c.secret, c.in)
		for _, k := range c.keep {
			require.Contains(t, got, k, c.in)
		}
		require.Equal(t, got, Scrub(got), "idempotent: %s", c.in)
	}
	for _, s := range []string{
		"job completed", "claimed 5 jobs in 3ms", "author: bob", "http://example.com/a?b=c",
		"dial tcp 10.0.0.1:5432: connection refused", "basic configuration loaded",
		"user@example.com sent", "",
	} {
		require.Equal(t, s, Scrub(s))
	}
}

func TestScrubUserinfo(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"dial smtp://bob:pw@mail:25 failed":           "dial smtp://bob:" + Redacted + "@mail:25 failed",
		"smtp://bob:p@ss@mail and redis://:r@cache/0": "smtp://bob:" + Redacted + "@mail and redis://:" + Redacted + "@cache/0",
		`parse "smtp://u:pw@h/%zz": invalid escape`:   `parse "smtp://u:` + Redacted + `@h/%zz": invalid escape`,
		"postgres://postgres@db/app":                  "postgres://postgres@db/app", // no password
		"mail bob@example.com":                        "mail bob@example.com",
	} {
		require.Equal(t, want, ScrubUserinfo(in), in)
	}
}

func TestScrubJSON(t *testing.T) {
	t.Parallel()
	in := []byte(`{"to":"a@b.c","smtp":{"host":"mail","password":"mailpw"},"items":[{"token":"t1"},{"v":"x"}],` +
		`"url":"https://u:urlpw@h/p","n":12345678901234567890,"html":"<b>&</b>"}`)
	out := []byte(Scrub(string(in)))
	require.True(t, json.Valid(out), string(out))
	for _, s := range []string{"mailpw", "t1", "urlpw"} {
		require.NotContains(t, string(out), s)
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	require.Equal(t, "a@b.c", m["to"])
	require.Equal(t, "mail", m["smtp"].(map[string]any)["host"])
	require.Equal(t, Redacted, m["smtp"].(map[string]any)["password"])
	require.Equal(t, "x", m["items"].([]any)[1].(map[string]any)["v"])
	require.Equal(t, "https://u:[REDACTED]@h/p", m["url"])
	require.Contains(t, string(out), "12345678901234567890", "numbers keep their precision")
	require.Contains(t, string(out), "<b>&</b>", "no HTML escaping")

	clean := `{"b":1, "a":"x", "url":"https://u@h/p"}`
	require.Equal(t, clean, Scrub(clean), "unchanged input is returned as is")
}

type smtpConfig struct {
	Host     string
	Password string
}

// scrubPlace is a place the handler scrubs: how to log a secret there,
// and a part of the record that must stay.
type scrubPlace struct {
	name   string
	secret string
	keep   string
	log    func(l *slog.Logger)
}

// scrubPlaces are the places TestScrubbingEverywhere logs a secret in.
var scrubPlaces = []scrubPlace{
	{"attr key", "attrsecret1", "visible-attr", func(l *slog.Logger) {
		l.Info("login", "password", "attrsecret1", "user", "visible-attr")
	}},
	{"header-style key", "apikeysecret2", "visible-h", func(l *slog.Logger) {
		l.Info("req", "X-Api-Key", "apikeysecret2", "path", "visible-h")
	}},
	{"nested group", "groupsecret3", "visible-group", func(l *slog.Logger) {
		l.Info("cfg", slog.Group("smtp", slog.String("host", "visible-group"),
			slog.Group("auth2", slog.String("smtp_password", "groupsecret3"))))
	}},
	{"secret group name", "wholegroup4", "visible-wg", func(l *slog.Logger) {
		l.Info("cfg", "note", "visible-wg", slog.Group("credentials", slog.String("user", "wholegroup4")))
	}},
	{"WithGroup secret", "withgroup5", "visible-wgr", func(l *slog.Logger) {
		l.WithGroup("session").Info("visible-wgr", "id", "withgroup5")
	}},
	{"WithAttrs", "withattrs6", "visible-wa", func(l *slog.Logger) {
		l.With("token", "withattrs6").Info("visible-wa")
	}},
	{"URL password in attr", "urlpass7", "db.example", func(l *slog.Logger) {
		l.Error("db down", "error", errors.New("connect postgres://flint:urlpass7@db.example/flint: refused"))
	}},
	{"bearer header string", "bearertok8", "upstream said", func(l *slog.Logger) {
		l.Warn("upstream said no", "header", "Authorization: Bearer bearertok8")
	}},
	{"payload JSON field", "payloadpw9", "visible-payload", func(l *slog.Logger) {
		l.Info("enqueued", "payload", json.RawMessage(`{"to":"visible-payload","smtp":{"password":"payloadpw9"}}`))
	}},
	{"payload bytes", "bytespw10", "visible-bytes", func(l *slog.Logger) {
		l.Info("enqueued", "payload", []byte(`{"to":"visible-bytes","api_key":"bytespw10"}`))
	}},
	{"payload map", "mappw11", "visible-map", func(l *slog.Logger) {
		l.Info("enqueued", "payload", map[string]any{"to": "visible-map", "headers": map[string]any{"Authorization": "mappw11"}})
	}},
	{"struct", "structpw12", "visible-struct", func(l *slog.Logger) {
		l.Info("config", "smtp", smtpConfig{Host: "visible-struct", Password: "structpw12"})
	}},
	{"key=value in message", "msgpw13", "connecting as", func(l *slog.Logger) {
		l.Info("connecting as user=bob password=msgpw13")
	}},
	{"LogValuer", "valuerpw14", "visible-valuer", func(l *slog.Logger) {
		l.Info("x", "v", valuer{"visible-valuer", "valuerpw14"})
	}},
}

// TestScrubbingEverywhere logs a secret in each place the handler scrubs and
// checks that it reaches neither the file, nor stdout (JSON and text), nor
// the entries shipped to the database, while the rest of the record does.
func TestScrubbingEverywhere(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "text"} {
		dir := t.TempDir()
		out := &syncbuf.Buffer{}
		lg, err := New(Config{Format: format, File: dir + "/flint.log", Stdout: out})
		require.NoError(t, err)
		db := &memSink{}
		stop := ship(t, lg, db, ShipConfig{Process: testProcess})
		for _, p := range scrubPlaces {
			p.log(lg.Slog())
		}
		stop()
		entries := db.stored()
		require.Len(t, entries, len(scrubPlaces))
		var shipped []string
		for _, e := range entries {
			b, err := json.Marshal(e)
			require.NoError(t, err)
			shipped = append(shipped, string(b))
		}
		require.NoError(t, lg.Close())
		file, err := os.ReadFile(lg.File())
		require.NoError(t, err)
		sinks := map[string]string{
			"file": string(file), "stdout": out.String(), "database": strings.Join(shipped, "\n"),
		}
		for _, p := range scrubPlaces {
			for sink, content := range sinks {
				require.NotContains(t, content, p.secret, "%s: %s leaked to %s", format, p.name, sink)
				require.Contains(t, content, p.keep, "%s: %s lost its non-secret part in %s", format, p.name, sink)
			}
		}
		require.Contains(t, sinks["file"], Redacted)
		for _, line := range strings.Split(strings.TrimSpace(sinks["file"]), "\n") {
			require.True(t, json.Valid([]byte(line)), "file is JSON even with %s stdout: %s", format, line)
		}
		if format == "text" {
			require.False(t, strings.HasPrefix(out.String(), "{"), "stdout is text")
		}
	}
}

type valuer struct{ user, pw string }

func (v valuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user", v.user), slog.String("password", v.pw))
}

// Values that merely look like composite types but print as text (ids,
// times) are left alone, and well-known keys are never redacted.
func TestScrubKeepsOrdinaryValues(t *testing.T) {
	t.Parallel()
	out := &syncbuf.Buffer{}
	lg, err := New(Config{Stdout: out})
	require.NoError(t, err)
	id := uuid.New()
	lg.Slog().Info("done", "job_id", id, "type", "send_email", "queue", "default", "duration_ms", 12,
		"at", time.Unix(0, 0).UTC(), "list", []string{"a", "b"})
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out.String()), &m))
	require.Equal(t, id.String(), m["job_id"])
	require.Equal(t, "send_email", m["type"])
	require.Equal(t, "default", m["queue"])
	require.EqualValues(t, 12, m["duration_ms"])
	require.Equal(t, "1970-01-01T00:00:00Z", m["at"])
	require.Equal(t, []any{"a", "b"}, m["list"])
}

func BenchmarkScrubPlain(b *testing.B) {
	s := "job completed in 12ms on worker w-1 (queue default)"
	for b.Loop() {
		_ = Scrub(s)
	}
}

func BenchmarkHandlerLine(b *testing.B) {
	lg, err := New(Config{Stdout: discard{}})
	require.NoError(b, err)
	l := lg.Slog().With("component", "worker")
	id := uuid.New()
	for b.Loop() {
		l.Info("job completed", "job_id", id, "type", "send_email", "queue", "default", "duration_ms", 12)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
