package auth

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEstimateStrength: secrets built from patterns score far below the
// thresholds, whatever their length, and every secret Flint (or `make
// run`) generates scores above them, every time.
func TestEstimateStrength(t *testing.T) {
	t.Parallel()
	weak := []struct {
		name, secret string
		max          float64
		flaw         string
	}{
		{"digits in sequence", "123456789012345678901234", 40, "only digits"},
		{"one letter", strings.Repeat("a", 32), 20, "a part repeated"},
		{"a short part repeated", strings.Repeat("Xk9q", 8), 40, "a part repeated"},
		{"word and digits", "admin1234567", 30, "a common word"},
		{"keyboard", "qwertyuiop123456", 50, "a run of characters in sequence or repeated"},
		{"a word many times", "PasswordPasswordPassword", 30, "a common word"},
		{"descending", "zyxwvutsrqponmlk", 20, "a run of characters in sequence or repeated"},
	}
	for _, tc := range weak {
		s := EstimateStrength(tc.secret)
		require.Less(t, s.Bits, tc.max, tc.name)
		require.Contains(t, s.Flaws, tc.flaw, tc.name)
		for _, f := range s.Flaws {
			require.NotContains(t, tc.secret, f, "%s: a flaw never quotes the secret", tc.name)
		}
	}

	hexOf := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	alnum := func(n int) string { // scripts/dev-env.sh's password
		const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, n)
		_, _ = rand.Read(b)
		for i := range b {
			b[i] = a[int(b[i])%len(a)]
		}
		return string(b)
	}
	strong := []struct {
		name string
		gen  func() string
		min  float64
	}{
		{"flint secret", NewSecret, MinKeyBits},
		{"API key secret", func() string { s, _ := NewKeySecret(); return s }, MinKeyBits},
		{"generated API key (24 bytes hex)", func() string { return hexOf(24) }, MinKeyBits},
		{"generated session key (32 bytes hex)", func() string { return hexOf(32) }, MinKeyBits},
		{"openssl rand -base64 32", func() string {
			b := make([]byte, 32)
			_, _ = rand.Read(b)
			return base64.StdEncoding.EncodeToString(b)
		}, MinKeyBits},
		{"generated user password", NewPassword, MinPasswordBits},
		{"generated admin password (12 bytes hex)", func() string { return hexOf(12) }, MinPasswordBits},
		{"make run's admin password", func() string { return alnum(16) }, MinPasswordBits},
	}
	for _, tc := range strong {
		for range 300 {
			secret := tc.gen()
			s := EstimateStrength(secret)
			require.GreaterOrEqual(t, s.Bits, tc.min, "%s: %s scored %.0f (%v)", tc.name, secret, s.Bits, s.Flaws)
		}
	}

	// A random 128-bit hex key (openssl rand -hex 16) is worth about 128.
	s := EstimateStrength("b1e5c2a9f07d4e63a8c1d5f29e0b7c34")
	require.InDelta(t, 128, s.Bits, 0.01)
	require.Empty(t, s.Flaws)
	// A very long secret is read in part, and still strong.
	require.Greater(t, EstimateStrength(strings.Repeat(hexOf(32), 100)).Bits, float64(MinKeyBits))
	require.Contains(t, EstimateStrength("").Flaws, "empty or not UTF-8")
}
