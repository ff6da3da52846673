package logs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScrubFormats: one case per secret format, each the way it turns up
// in an error or a log line; the secret is gone, what frames it stays,
// and scrubbing again changes nothing. Every token rule has a case.
func TestScrubFormats(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, secret string
		keep             []string
	}{
		{"AWS access key id", "using key AKIAIOSFODNN7EXAMPLE for s3", "IOSFODNN7EXAMPLE", []string{"using key AKIA[REDACTED] for s3"}},
		{"AWS temporary key id", "creds ASIAY34FZKBOKMUTVV7A expired", "Y34FZKBOKMUTVV7A", []string{"ASIA[REDACTED] expired"}},
		{"Google API key", "GET https://maps.example/api?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q&q=x failed", "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", []string{"key=AIza[REDACTED]", "&q=x failed"}},
		{"AWS presigned URL", "GET https://b.s3.example/o?X-Amz-Credential=AKID%2F2024&X-Amz-Signature=9f8e7d6c5b4a39281706f5e4d3c2b1a0 403", "9f8e7d6c5b4a39281706f5e4d3c2b1a0", []string{"X-Amz-Signature=[REDACTED]", " 403"}},
		{"SAS signature", "PUT https://acct.blob.example/c?sv=2022&sig=AzSasSig123%3D&se=2030 failed", "AzSasSig123", []string{"sig=[REDACTED]", "sv=2022"}},
		{"URL-encoded password", "login form sent password%3Dhunter2 back", "hunter2", []string{"password%3D[REDACTED] back"}},
		{"environment variable", "ran PGPASSWORD hunter2 psql -h db", "hunter2", []string{"PGPASSWORD [REDACTED] psql -h db"}},
		{"environment variable with underscore", "DB_PASSWORD s3cr3tpw was rejected", "s3cr3tpw", []string{"DB_PASSWORD [REDACTED] was rejected"}},
		{"JSON Web Token", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk rejected", "dBjftJeZ4CVPmB92K27uhbUJU1p1r", []string{"rejected"}},
		{"bare JSON Web Token", "got eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk", "eyJzdWIiOiIxMjM0In0", []string{"got eyJ[REDACTED]"}},
		{"Flint key or secret (API key)", "calling with flint_Yq3xW2v9Lm4Kp7Rt1Zs8Nb6Hc5Jd0Fg2Qa4We6Ry8U", "Yq3xW2v9Lm4Kp7Rt1Zs8Nb6Hc5Jd0Fg2Qa4We6Ry8U", []string{"calling with flint_[REDACTED]"}},
		{"Flint key or secret (flint secret)", "FLINT_API_KEY was flint_s1_Yq3xW2v9Lm4Kp7Rt1Zs8Nb6Hc5Jd0Fg2Qa4We6Ry8UAbCdEf", "Yq3xW2v9Lm4Kp7Rt1Zs8Nb6Hc5", []string{"flint_s1_[REDACTED]"}},
		{"GitHub token", "clone with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed", "16C7e42F292c6912E7710c838347Ae178B4a", []string{"ghp_[REDACTED] failed"}},
		{"GitHub fine-grained token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ01 denied", "abcdefghijklmnopqrstuvwxyz", []string{"github_pat_[REDACTED] denied"}},
		{"Stripe key (secret)", "charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc refused", "4eC39HqLyjWDarjtT1zdp7dc", []string{"sk_live_[REDACTED] refused"}},
		{"Stripe key (restricted)", "rk_test_51H8aBcDeFgHiJkLmNoPqRsT", "51H8aBcDeFgHiJkLmNoPqRsT", []string{"rk_test_[REDACTED]"}},
		{"Slack token", "post with xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOpQrStUvWx", []string{"xoxb-[REDACTED]"}},
		{"SendGrid key", "mail via 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 ok", "TwL2iGABf9DHoTf", []string{"SG.[REDACTED] ok"}},
		{"npm token", "npm_1234567890abcdefghijklmnopqrstuvwxyz in .npmrc", "1234567890abcdefghij", []string{"npm_[REDACTED] in .npmrc"}},
		{"webhook signing secret", "secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw rotated", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", []string{"whsec_[REDACTED] rotated"}},
		{"PEM private key", "key -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234\n-----END RSA PRIVATE KEY----- loaded", "MIIEowIBAAKCAQEA1234", []string{"-----BEGIN RSA PRIVATE KEY-----[REDACTED] loaded"}},
		{"password with a slash in a URL", "dial amqp://guest:pa/ss@rabbit:5672/vhost refused", "pa/ss", []string{"amqp://guest:[REDACTED]@rabbit:5672/vhost refused"}},
		{"postgres URL", "connect postgres://u:pw@db/x failed", ":pw@", []string{"postgres://u:[REDACTED]@db/x failed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Scrub(tc.in)
			require.NotContains(t, got, tc.secret)
			for _, k := range tc.keep {
				require.Contains(t, got, k)
			}
			require.Equal(t, got, Scrub(got), "idempotent")
		})
	}
	// Every token rule is exercised above.
	for _, name := range TokenFormats() {
		found := false
		for _, tc := range cases {
			found = found || strings.HasPrefix(tc.name, name) || strings.Contains(tc.name, name)
		}
		require.True(t, found, "no case for %s", name)
	}
	// Prose and ordinary identifiers survive.
	for _, s := range []string{
		"PASSWORD RESET email sent", "signal=SIGTERM received", "design: flat", "Asia/Tokyo is the zone",
		"flint_jobs table vacuumed", "job eyJ is not a token", "skipped sk_ prefix", "http://example.com/a@b",
	} {
		require.Equal(t, s, Scrub(s))
	}
}

// BenchmarkScrubLine measures what scrubbing costs one log line of each
// kind: with nothing to scrub (the common case), with a key=value secret,
// with a bare token, and a long line with nothing to scrub.
func BenchmarkScrubLine(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"plain", "job completed in 12ms on worker w-1 (queue default)"},
		{"error", `push to https://hooks.example: Post: dial tcp 10.0.0.7:443: connect: connection refused`},
		{"kv_secret", "login user=bob password=s3cr3tpw host=db.internal port=5432"},
		{"token", "calling the API with ghp_16C7e42F292c6912E7710c838347Ae178B4a for repo acme/x"},
		{"long_plain", strings.Repeat("worker w-1 claimed 100 jobs of queue default in 3ms; ", 40)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.line)))
			b.ReportAllocs()
			for b.Loop() {
				_ = Scrub(bc.line)
			}
		})
	}
}
