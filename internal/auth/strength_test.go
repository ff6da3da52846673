package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWeakSecretsRefused: the secrets a security review found starting
// production (keys and passwords built from words, dates, keyboard walks
// and sequences, however long) are refused, each without being quoted.
func TestWeakSecretsRefused(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"CorrectHorseBatteryStaple1", "correct horse battery staple", "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik,9ol.0p;/",
		"aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpP", "January2024February2024March2024", "ThisIsMyVeryLongAndSecureApiKey!",
		"deadbeefcafebabefeedfacebaadf00d", "!QAZ2wsx#EDC4rfv%TGB6yhn&UJM8ik,", "a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6",
		strings.Repeat("q", 64), "123456789012345678901234",
	} {
		err := CheckMachineSecret(key)
		require.Error(t, err, key)
		require.NotContains(t, err.Error(), key)
	}
	for _, pw := range []string{"P@ssw0rd2024!", "Summer2024!", "Qwer1234!@#$", "1qaz2wsx3edc4rfv", "Changeit2024!", "admin1234567"} {
		err := CheckPasswordStrength(pw, "admin@flint.local")
		require.Error(t, err, pw)
		require.NotContains(t, err.Error(), pw)
	}
	// A generated secret mistyped or cut short is told apart.
	s := NewSecret()
	require.ErrorContains(t, CheckMachineSecret(s[:len(s)-1]+"x"), "checksum")
	require.ErrorContains(t, CheckMachineSecret(s[:len(s)-4]), "checksum")
}

// TestStrongSecretsPass: every secret Flint generates, and random keys
// and passwords of the recommended sizes, pass, every time.
func TestStrongSecretsPass(t *testing.T) {
	t.Parallel()
	hexOf := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	alnum := func(n int) string { // scripts/dev-env.sh's password (20 characters: at 16, about one in 1,300 scored under the floor)
		const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, n)
		_, _ = rand.Read(b)
		for i := range b {
			b[i] = a[int(b[i])%len(a)]
		}
		return string(b)
	}
	keys := []struct {
		name string
		gen  func() string
	}{
		{"flint secret", NewSecret},
		{"openssl rand -hex 32", func() string { return hexOf(32) }},
		{"openssl rand -base64 32", func() string {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			return base64.StdEncoding.EncodeToString(b)
		}},
	}
	for _, tc := range keys {
		for range 50 {
			secret := tc.gen()
			require.NoError(t, CheckMachineSecret(secret), "%s: %s", tc.name, secret)
		}
	}
	passwords := []struct {
		name string
		gen  func() string
	}{
		{"flint secret", NewSecret},
		{"generated user password", NewPassword},
		{"generated admin password (12 bytes hex)", func() string { return hexOf(12) }},
		{"make run's admin password", func() string { return alnum(20) }},
	}
	for _, tc := range passwords {
		for range 50 {
			pw := tc.gen()
			require.NoError(t, CheckPasswordStrength(pw, "admin@flint.local"), "%s: %s", tc.name, pw)
		}
	}
	s := NewSecret()
	require.True(t, GeneratedSecret(s))
	require.True(t, strings.HasPrefix(s, GeneratedSecretPrefix))
	require.Len(t, s, generatedLen)
	require.NotEqual(t, s, NewSecret())
}
