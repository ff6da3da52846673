package workers

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

// ---------------------------------------------------------------------------
// Configuration

func TestNewSMTPMailerConfig(t *testing.T) {
	t.Parallel()
	valid := []struct {
		url         string
		host        string
		port        int
		implicitTLS bool
		policy      string
		auth        bool
	}{
		{"smtp://127.0.0.1:1025", "127.0.0.1", 1025, false, "TLSOpportunistic", false},
		{"smtp://mail.example.com", "mail.example.com", 25, false, "TLSOpportunistic", false},
		{"smtp://mail.example.com:587/?starttls=required", "mail.example.com", 587, false, "TLSMandatory", false},
		{"smtp://mail.example.com:25?starttls=opportunistic", "mail.example.com", 25, false, "TLSOpportunistic", false},
		{"smtp://mail.example.com:25?starttls=none", "mail.example.com", 25, false, "NoTLS", false},
		{"smtps://user:p%40ss@mail.example.com", "mail.example.com", 465, true, "", true},
		{"smtps://mail.example.com:2465", "mail.example.com", 2465, true, "", false},
		{"SMTP://[::1]:2525", "::1", 2525, false, "TLSOpportunistic", false},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.url, func(t *testing.T) {
			t.Parallel()
			m, err := NewSMTPMailer(SMTPConfig{URL: tc.url})
			require.NoError(t, err)
			require.Equal(t, tc.host, m.host)
			require.Equal(t, tc.port, m.port)
			require.Equal(t, tc.implicitTLS, m.implicitTLS)
			if !tc.implicitTLS {
				require.Equal(t, tc.policy, m.tlsPolicy.String())
			}
			require.Equal(t, tc.auth, m.hasAuth)
			require.Equal(t, DefaultSMTPTimeout, m.timeout)
			require.Equal(t, "flint@localhost", m.from.Address)
			require.Equal(t, "Flint", m.from.Name)
			require.NotContains(t, m.String(), "p%40ss")
		})
	}

	invalid := []struct {
		name string
		cfg  SMTPConfig
		want string
	}{
		{"empty", SMTPConfig{}, "SMTP URL: is empty"},
		{"no scheme", SMTPConfig{URL: "mail.example.com:25"}, "SMTP URL"},
		{"http scheme", SMTPConfig{URL: "http://mail.example.com"}, `scheme must be smtp or smtps, not "http"`},
		{"opaque", SMTPConfig{URL: "smtp:mail.example.com:25"}, "with the slashes"},
		{"no host", SMTPConfig{URL: "smtp://:25"}, "has no host"},
		{"bad port", SMTPConfig{URL: "smtp://mail.example.com:0"}, "port must be between 1 and 65535"},
		{"huge port", SMTPConfig{URL: "smtp://mail.example.com:70000"}, "port must be between 1 and 65535"},
		{"path", SMTPConfig{URL: "smtp://mail.example.com/inbox"}, "must not have a path"},
		{"unknown param", SMTPConfig{URL: "smtp://mail.example.com?tls=yes"}, `unknown parameter "tls"`},
		{"bad starttls", SMTPConfig{URL: "smtp://mail.example.com?starttls=maybe"}, `starttls must be required, opportunistic or none, not "maybe"`},
		{"starttls on smtps", SMTPConfig{URL: "smtps://mail.example.com?starttls=none"}, "starttls applies to smtp:// only"},
		{"user info without user", SMTPConfig{URL: "smtp://:pw@mail.example.com"}, "without a user name"},
		{"line break", SMTPConfig{URL: "smtp://mail.example.com\r\n"}, "control characters"},
		{"bad from", SMTPConfig{URL: "smtp://mail.example.com", From: "not an address"}, "SMTP From"},
		{"from with line break", SMTPConfig{URL: "smtp://mail.example.com", From: "a@b.c\r\nBcc: x@y.z"}, "SMTP From"},
		{"negative timeout", SMTPConfig{URL: "smtp://mail.example.com", Timeout: -time.Second}, "timeout"},
	}
	for _, tc := range invalid {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewSMTPMailer(tc.cfg)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}

	t.Run("custom from and timeout", func(t *testing.T) {
		t.Parallel()
		m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://localhost:25", From: "Ops <ops@example.com>", Timeout: 3 * time.Second})
		require.NoError(t, err)
		require.Equal(t, "ops@example.com", m.from.Address)
		require.Equal(t, 3*time.Second, m.timeout)
	})
}

// No error from NewSMTPMailer or Send may carry the password.
func TestSMTPMailerNeverLeaksPassword(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-Pa55"
	for _, raw := range []string{
		"smtp://user:" + secret + "@mail.example.com:bad",
		"smtp://user:" + secret + "@mail.example.com:99999",
		"smtp://user:" + secret + "@mail.example.com?starttls=bogus",
		"ftp://user:" + secret + "@mail.example.com",
		"smtp://user:" + secret + "@mail.example.com/%zz",
		"smtp://user:" + secret + "@[::1",
	} {
		_, err := NewSMTPMailer(SMTPConfig{URL: raw})
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), secret)
	}

	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://user:" + secret + "@" + addr, Timeout: 2 * time.Second})
		require.NoError(t, err)
		err = m.Send(context.Background(), domain.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"})
		require.Error(t, err)
		require.NotErrorIs(t, err, domain.ErrPermanentDelivery, "a refused connection is temporary")
		require.NotContains(t, err.Error(), secret)
	})

	t.Run("server echoes credentials", func(t *testing.T) {
		t.Parallel()
		srv := startFakeSMTP(t, fakeSMTPConfig{auth: true, authReply: "535 5.7.8 bad credentials: %s"})
		m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://user:" + url.QueryEscape(secret) + "@" + srv.addr, Timeout: 5 * time.Second})
		require.NoError(t, err)
		err = m.Send(context.Background(), domain.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"})
		require.Error(t, err)
		require.Contains(t, err.Error(), "535")
		require.NotContains(t, err.Error(), secret)
		require.NotContains(t, err.Error(), base64.StdEncoding.EncodeToString([]byte("\x00user\x00"+secret)))
		// Even unwrapping cannot reach the original text.
		for e := error(err); e != nil; e = errors.Unwrap(e) {
			require.NotContains(t, e.Error(), secret)
		}
		require.True(t, srv.sawAuth(secret), "the server should have been sent the password")
	})
}
