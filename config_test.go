package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigErrorsNameEverySetting: one error lists every bad setting, and
// a worker cannot be told to listen on a queue nothing can be enqueued to.
func TestConfigErrorsNameEverySetting(t *testing.T) {
	env := map[string]string{
		"FLINT_WORKERS": "0",
		"FLINT_QUEUES":  "mail,bad/queue,sp ace",
		"LOG_LEVEL":     "loud",
	}
	_, err := loadConfig("worker", nil, func(k string) string { return env[k] })
	require.Error(t, err)
	for _, want := range []string{"FLINT_WORKERS=0", `"bad/queue" is not a valid queue name`, `"sp ace" is not a valid queue name`, `LOG_LEVEL="loud"`} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), `"mail"`)

	env = map[string]string{"FLINT_QUEUES": "mail, reports:daily"}
	c, err := loadConfig("worker", nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []string{"mail", "reports:daily"}, c.Queues)
}

// TestProductionRefusesDevelopmentSecrets: with FLINT_ENV=production, serve
// and api refuse the development defaults that ship with Flint, the
// values `make run` wrote to .flint/dev.env, and secrets too short or too
// simple, naming each setting; random secrets pass, and development is
// untouched.
func TestProductionRefusesDevelopmentSecrets(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.MkdirAll(".flint", 0o700))
	require.NoError(t, os.WriteFile(".flint/dev.env", []byte("# Flint development settings\nFLINT_API_KEY=3f9c0b7e1d2a4c6b8e0f1a3c5e7d9b2f\nFLINT_ADMIN_PASSWORD=Kq7dLm2pXz9RtV4w\n"), 0o600))
	load := func(cmd string, env map[string]string) error {
		_, err := loadConfig(cmd, nil, func(k string) string { return env[k] })
		return err
	}
	good := map[string]string{
		"FLINT_ENV":            "production",
		"FLINT_API_KEY":        "b1e5c2a9f07d4e63a8c1d5f29e0b7c34",
		"FLINT_SESSION_KEY":    "7c2e9a41d0b8f6e35a1c7d9e2b4f6a8c0e1d3b5f7a9c2e4d6b8f0a1c3e5d7b9f",
		"FLINT_ADMIN_PASSWORD": "Tz8mQe4vNw2rLk6s",
	}
	require.NoError(t, load("serve", good))
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for _, tc := range []struct{ name, key, value, want string }{
		{"compose API key", "FLINT_API_KEY", "flint-dev-api-key-change-me", `FLINT_API_KEY looks like a development or placeholder value (it contains "change-me")`},
		{"compose password", "FLINT_ADMIN_PASSWORD", "flint-dev-password-change-me", `FLINT_ADMIN_PASSWORD looks like a development`},
		{"dev.env key", "FLINT_API_KEY", "3f9c0b7e1d2a4c6b8e0f1a3c5e7d9b2f", "FLINT_API_KEY is the development value from .flint/dev.env"},
		{"dev.env password", "FLINT_ADMIN_PASSWORD", "Kq7dLm2pXz9RtV4w", "FLINT_ADMIN_PASSWORD is the development value from .flint/dev.env"},
		{"short key", "FLINT_API_KEY", "a8f3k2m9q4w7e1r6", "FLINT_API_KEY: use at least 24 characters when FLINT_ENV=production"},
		{"short password", "FLINT_ADMIN_PASSWORD", "Tz8mQe4vNw", "FLINT_ADMIN_PASSWORD: use at least 12 characters"},
		{"simple session key", "FLINT_SESSION_KEY", strings.Repeat("ab", 20), "FLINT_SESSION_KEY is too simple (2 different characters)"},
	} {
		err := load("serve", with(tc.key, tc.value))
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
		require.NoError(t, load("serve", map[string]string{tc.key: tc.value}), "%s: development accepts it", tc.name)
		require.NoError(t, load("worker", with(tc.key, tc.value)), "%s: a worker serves no API or dashboard", tc.name)
	}
	// Every problem at once, each named.
	err := load("api", map[string]string{"FLINT_ENV": "production", "FLINT_API_KEY": "flint-dev-api-key-change-me",
		"FLINT_ADMIN_PASSWORD": "flint-dev-password-change-me", "FLINT_SESSION_KEY": strings.Repeat("x", 40)})
	require.Error(t, err)
	for _, want := range []string{"FLINT_API_KEY", "FLINT_ADMIN_PASSWORD", "FLINT_SESSION_KEY"} {
		require.Contains(t, err.Error(), want)
	}
}
