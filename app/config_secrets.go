package app

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/jobs"
)

// settleSecrets checks the API key, session key and admin password,
// generating the ones development leaves unset, and the addresses that go
// with them.
func (c *Config) settleSecrets(cmd string, r *configReader) {
	if c.APIKey == "" {
		if c.Production() && rolesOf(cmd).http {
			r.bad("FLINT_API_KEY is required when FLINT_ENV=production (a random secret: `flint secret` prints one)")
		}
		c.APIKey = randomToken(24)
		c.APIKeyGenerated = true
	} else if len(c.APIKey) < 16 {
		r.bad("FLINT_API_KEY: use at least 16 characters")
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.bad("FLINT_PUBLIC_URL=%q: want the dashboard's http(s) address", c.PublicURL)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			r.bad("FLINT_METRICS_ADDR=%q: want host:port or :port", c.MetricsAddr)
		}
	}
	if c.MailUIURL == "" && !c.Production() {
		c.MailUIURL = "http://localhost:8025"
	}
	if c.MailUIURL != "" {
		if u, err := url.Parse(c.MailUIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			r.bad("FLINT_MAIL_UI_URL=%q: want an http(s) URL", c.MailUIURL)
		}
	}
	if c.SessionKey == "" {
		if c.Production() && rolesOf(cmd).http {
			r.bad("FLINT_SESSION_KEY is required when FLINT_ENV=production (a random secret: `flint secret` prints one)")
		}
		c.SessionKey = randomToken(32)
		c.SessionKeyGenerated = true
	} else if len(c.SessionKey) < 32 {
		r.bad("FLINT_SESSION_KEY: use at least 32 characters")
	}
	if c.AdminPassword == "" {
		c.AdminPassword = randomToken(12)
		c.AdminPasswordGenerated = true
	} else if len(c.AdminPassword) < 8 || len(c.AdminPassword) > 72 {
		r.bad("FLINT_ADMIN_PASSWORD: use 8 to 72 characters")
	}
	if !strings.Contains(c.AdminEmail, "@") || !jobs.CleanText(c.AdminEmail) {
		r.bad("FLINT_ADMIN_EMAIL=%q: want an email address", c.AdminEmail)
	}
	if c.Production() && rolesOf(cmd).http {
		checkProductionSecrets(c, readDevEnv(devEnvFile), r.bad)
	}
}

// randomToken is n random bytes in hex.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// devEnvFile holds the secrets `make run` generates for development.
const devEnvFile = ".flint/dev.env"

// devSecretMarkers appear in the development defaults Flint ships (the
// compose file's "…-change-me" values) and in placeholders people copy.
var devSecretMarkers = []string{"change-me", "changeme", "change_me", "dev-api-key", "dev-password", "example", "secret", "password"}

// checkProductionSecrets refuses, in production, a secret that is a known
// development value (a shipped default, or the one `make run` wrote to
// .flint/dev.env) or too easy to guess (auth.CheckMachineSecret for a
// key: `flint secret`'s, or zxcvbn's estimate at auth.MinKeyBits;
// auth.CheckPasswordStrength for the admin password), naming the setting
// to change. Generated secrets are random and pass.
func checkProductionSecrets(c *Config, devEnv map[string]string, bad func(string, ...any)) {
	check := func(name, value string, generated bool, strength func(string) error) {
		if generated || value == "" {
			return
		}
		low := strings.ToLower(value)
		for _, m := range devSecretMarkers {
			if strings.Contains(low, m) {
				bad("%s looks like a development or placeholder value (it contains %q); set a random secret of your own for FLINT_ENV=production (`flint secret` prints one)", name, m)
				return
			}
		}
		if devEnv[name] == value {
			bad("%s is the development value from %s; set a different secret for FLINT_ENV=production (`flint secret` prints one)", name, devEnvFile)
			return
		}
		if err := strength(value); err != nil {
			bad("%s %v for FLINT_ENV=production; `flint secret` prints one", name, err)
		}
	}
	check("FLINT_API_KEY", c.APIKey, c.APIKeyGenerated, auth.CheckMachineSecret)
	check("FLINT_SESSION_KEY", c.SessionKey, c.SessionKeyGenerated, auth.CheckMachineSecret)
	check("FLINT_ADMIN_PASSWORD", c.AdminPassword, c.AdminPasswordGenerated, func(pw string) error {
		return auth.CheckPasswordStrength(pw, c.AdminEmail)
	})
}

// readDevEnv reads KEY=value lines of the development settings file; a
// missing or unreadable file is an empty map.
func readDevEnv(path string) map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out
}
