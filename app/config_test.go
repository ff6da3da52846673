package app

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/auth"
)

// TestConfigErrorsNameEverySetting: one error lists every bad setting, and
// a worker cannot be told to listen on a queue nothing can be enqueued to.
func TestConfigErrorsNameEverySetting(t *testing.T) {
	env := map[string]string{
		"FLINT_WORKERS": "0",
		"FLINT_QUEUES":  "mail,bad/queue,sp ace",
		"LOG_LEVEL":     "loud",
	}
	_, err := LoadConfig("worker", nil, func(k string) string { return env[k] })
	require.Error(t, err)
	for _, want := range []string{"FLINT_WORKERS=0", `"bad/queue" is not a valid queue name`, `"sp ace" is not a valid queue name`, `LOG_LEVEL="loud"`} {
		require.Contains(t, err.Error(), want)
	}
	require.NotContains(t, err.Error(), `"mail"`)

	env = map[string]string{"FLINT_QUEUES": "mail, reports:daily"}
	c, err := LoadConfig("worker", nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []string{"mail", "reports:daily"}, c.Queues)
}

// TestProductionRefusesDevelopmentSecrets: with FLINT_ENV=production, serve
// and api refuse the development defaults that ship with Flint, the
// values `make run` wrote to .flint/dev.env, and secrets of too little
// entropy, naming each setting and what makes it weak; random secrets
// (`flint secret`'s, the shape `make run` writes) pass, and development is
// untouched.
func TestProductionRefusesDevelopmentSecrets(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.MkdirAll(".flint", 0o700))
	require.NoError(t, os.WriteFile(".flint/dev.env", []byte("# Flint development settings\nFLINT_API_KEY=3f9c0b7e1d2a4c6b8e0f1a3c5e7d9b2f\nFLINT_ADMIN_PASSWORD=Kq7dLm2pXz9RtV4w\n"), 0o600))
	load := func(cmd string, env map[string]string) error {
		_, err := LoadConfig(cmd, nil, func(k string) string { return env[k] })
		return err
	}
	good := map[string]string{
		"FLINT_ENV":            "production",
		"FLINT_API_KEY":        "b1e5c2a9f07d4e63a8c1d5f29e0b7c34d2a8e6f1c9b3a7d5e0f4c8b2a6d1e9f3",
		"FLINT_SESSION_KEY":    "7c2e9a41d0b8f6e35a1c7d9e2b4f6a8c0e1d3b5f7a9c2e4d6b8f0a1c3e5d7b9f",
		"FLINT_ADMIN_PASSWORD": "Tz8mQe4vNw2rLk6s",
	}
	require.NoError(t, load("serve", good))
	require.NoError(t, load("serve", map[string]string{"FLINT_ENV": "production",
		"FLINT_API_KEY": auth.NewSecret(), "FLINT_SESSION_KEY": auth.NewSecret(), "FLINT_ADMIN_PASSWORD": auth.NewSecret()}),
		"secrets from `flint secret` pass")
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
		{"short key", "FLINT_API_KEY", "a8f3k2m9q4w7e1r6", "FLINT_API_KEY is too weak: about 53 bits by zxcvbn's estimate, at least 128 needed"},
		{"digits in sequence", "FLINT_API_KEY", "123456789012345678901234", "FLINT_API_KEY is too weak: about"},
		{"repeated session key", "FLINT_SESSION_KEY", strings.Repeat("abcdefgh", 4), "FLINT_SESSION_KEY is too weak"},
		{"one letter session key", "FLINT_SESSION_KEY", strings.Repeat("q", 32), "FLINT_SESSION_KEY is too weak"},
		{"words session key", "FLINT_SESSION_KEY", "ThisIsMyVeryLongAndSecureApiKey!", "FLINT_SESSION_KEY is too weak"},
		{"keyboard walk key", "FLINT_API_KEY", "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik,9ol.0p;/", "FLINT_API_KEY is too weak"},
		{"hex words key", "FLINT_API_KEY", "deadbeefcafebabefeedfacebaadf00d", "FLINT_API_KEY is too weak"},
		{"mistyped flint secret", "FLINT_API_KEY", strings.TrimSuffix(auth.NewSecret(), "A") + "x", "checksum does not match"},
		{"word and digits", "FLINT_ADMIN_PASSWORD", "admin1234567", "FLINT_ADMIN_PASSWORD is too weak: about"},
		{"season and year", "FLINT_ADMIN_PASSWORD", "Summer2024!", "FLINT_ADMIN_PASSWORD is too weak"},
		{"leet password", "FLINT_ADMIN_PASSWORD", "P@ssw0rd2024!", "FLINT_ADMIN_PASSWORD is too weak"},
		{"short password", "FLINT_ADMIN_PASSWORD", "Tz8mQe4vNw", "FLINT_ADMIN_PASSWORD is too weak"},
	} {
		err := load("serve", with(tc.key, tc.value))
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
		require.Contains(t, err.Error(), "`flint secret` prints one", tc.name)
		require.NotContains(t, strings.ReplaceAll(err.Error(), tc.key, ""), tc.value, "%s: the error does not repeat the secret", tc.name)
		for _, other := range []string{"FLINT_API_KEY", "FLINT_SESSION_KEY", "FLINT_ADMIN_PASSWORD"} {
			if other != tc.key {
				require.NotContains(t, err.Error(), other, "%s: only the weak setting is named", tc.name)
			}
		}
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

// TestSecretCommand: `flint secret` prints a secret production accepts for
// any setting.
func TestSecretCommand(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	require.Equal(t, 0, New().main([]string{"secret"}, &out, &errOut))
	secret := strings.TrimSpace(out.String())
	require.True(t, strings.HasPrefix(secret, auth.GeneratedSecretPrefix))
	require.True(t, auth.GeneratedSecret(secret))
	require.NoError(t, auth.CheckMachineSecret(secret))
	require.Equal(t, 2, New().main([]string{"secret", "extra"}, &out, &errOut))
}

func TestConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"FLINT_WORKERS":            "zero",
		"FLINT_LEASE_TTL":          "10s",
		"FLINT_HEARTBEAT_INTERVAL": "8s",
		"LOG_LEVEL":                "loud",
		"DATABASE_URL":             "mysql://x",
		"FLINT_ENV":                "production",
		"FLINT_HTTP_ALLOW":         "not a cidr/99",
	}
	_, err := LoadConfig("serve", nil, func(k string) string { return env[k] })
	require.Error(t, err)
	for _, want := range []string{"FLINT_WORKERS", "FLINT_HEARTBEAT_INTERVAL", "LOG_LEVEL", "DATABASE_URL", "FLINT_API_KEY is required", "FLINT_HTTP_ALLOW"} {
		require.Contains(t, err.Error(), want)
	}

	cfg, err := LoadConfig("worker", []string{"-workers", "3", "-queues", "a, b"}, func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Workers)
	require.Equal(t, []string{"a", "b"}, cfg.Queues)
	require.True(t, cfg.APIKeyGenerated)
}

// TestTrustedProxies: FLINT_TRUSTED_PROXIES takes addresses and CIDRs and
// names what it cannot read.
func TestTrustedProxies(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FLINT_TRUSTED_PROXIES": "10.0.0.0/8, 172.18.0.5,::1"}
	c, err := LoadConfig("api", nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.18.0.5/32"), netip.MustParsePrefix("::1/128")}, c.TrustedProxies)
	env["FLINT_TRUSTED_PROXIES"] = "10.0.0.0/8,proxy.internal"
	_, err = LoadConfig("api", nil, func(k string) string { return env[k] })
	require.ErrorContains(t, err, `FLINT_TRUSTED_PROXIES: "proxy.internal" is neither an address nor a CIDR`)
}

// TestMigrateForceFlag: flint migrate --force reaches the migrator; other
// commands do not take it.
func TestMigrateForceFlag(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": "postgres://u@localhost/flint"}
	c, err := LoadConfig("migrate", []string{"--force"}, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.True(t, c.MigrateForce)
	c, err = LoadConfig("migrate", nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.False(t, c.MigrateForce)
	_, err = LoadConfig("worker", []string{"--force"}, func(k string) string { return env[k] })
	require.Error(t, err)
}
