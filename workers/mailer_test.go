package workers

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	netmail "net/mail"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"flint/jobs"
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
		err = m.Send(context.Background(), jobs.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"})
		require.Error(t, err)
		require.NotErrorIs(t, err, jobs.ErrPermanentDelivery, "a refused connection is temporary")
		require.NotContains(t, err.Error(), secret)
	})

	t.Run("server echoes credentials", func(t *testing.T) {
		t.Parallel()
		srv := startFakeSMTP(t, fakeSMTPConfig{auth: true, authReply: "535 5.7.8 bad credentials: %s"})
		m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://user:" + url.QueryEscape(secret) + "@" + srv.addr, Timeout: 5 * time.Second})
		require.NoError(t, err)
		err = m.Send(context.Background(), jobs.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"})
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

// ---------------------------------------------------------------------------
// Behaviour against a scripted in-process SMTP server: authentication,
// permanent/temporary classification, cancellation.

func TestSMTPMailerAuthOnlyWithUserinfo(t *testing.T) {
	t.Parallel()
	e := jobs.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"}

	srv := startFakeSMTP(t, fakeSMTPConfig{auth: true})
	m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://" + srv.addr})
	require.NoError(t, err)
	require.NoError(t, m.Send(context.Background(), e))
	require.False(t, srv.sawCommand("AUTH"), "no user info, no AUTH")

	srv2 := startFakeSMTP(t, fakeSMTPConfig{auth: true})
	m2, err := NewSMTPMailer(SMTPConfig{URL: "smtp://alice:wonder%20land@" + srv2.addr})
	require.NoError(t, err)
	require.NoError(t, m2.Send(context.Background(), e))
	require.True(t, srv2.sawCommand("AUTH PLAIN"), "PLAIN is used on a localhost server")
	require.True(t, srv2.sawAuth("\x00alice\x00wonder land"))
}

// smtps:// must speak TLS from the first byte and starttls=required must
// not fall back to plaintext: against a plaintext server both fail before
// any mail command is sent.
func TestSMTPMailerTLSIsEnforced(t *testing.T) {
	t.Parallel()
	e := jobs.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"}
	for _, tc := range []struct{ scheme, query, want string }{
		{"smtps", "", "tls"},
		{"smtp", "?starttls=required", "STARTTLS"},
	} {
		t.Run(tc.scheme+tc.query, func(t *testing.T) {
			t.Parallel()
			srv := startFakeSMTP(t, fakeSMTPConfig{})
			m, err := NewSMTPMailer(SMTPConfig{URL: tc.scheme + "://" + srv.addr + tc.query, Timeout: 3 * time.Second})
			require.NoError(t, err)
			err = m.Send(context.Background(), e)
			require.Error(t, err)
			require.Contains(t, strings.ToLower(err.Error()), strings.ToLower(tc.want))
			require.NotErrorIs(t, err, jobs.ErrPermanentDelivery)
			require.False(t, srv.sawCommand("MAIL"), "nothing may be sent in plaintext")
		})
	}
}

func TestSMTPMailerPermanentVsTemporary(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		cfg       fakeSMTPConfig
		permanent bool
		want      string
	}{
		{"RCPT 550", fakeSMTPConfig{rcptReply: "550 5.1.1 no such user"}, true, "550"},
		{"RCPT 451", fakeSMTPConfig{rcptReply: "451 4.3.0 try later"}, false, "451"},
		{"MAIL 553", fakeSMTPConfig{mailReply: "553 5.7.1 sender rejected"}, true, "553"},
		{"MAIL 421", fakeSMTPConfig{mailReply: "421 4.7.0 too busy"}, false, "421"},
		{"DATA 554", fakeSMTPConfig{dataReply: "554 5.7.1 looks like spam"}, true, "554"},
		{"DATA 452", fakeSMTPConfig{dataReply: "452 4.3.1 out of storage"}, false, "452"},
		{"greeting 554", fakeSMTPConfig{greeting: "554 5.3.2 no service"}, false, "554"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startFakeSMTP(t, tc.cfg)
			m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://" + srv.addr, Timeout: 5 * time.Second})
			require.NoError(t, err)
			e := jobs.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"}
			err = m.Send(context.Background(), e)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Equal(t, tc.permanent, errors.Is(err, jobs.ErrPermanentDelivery), "%v", err)

			// Through the handler: permanent cancels, temporary retries.
			job := &jobs.Job{Attempt: 1, Payload: json.RawMessage(`{"to": "a@example.com", "subject": "s", "text": "t"}`)}
			_, err = jobs.NewSendEmailHandler(m).Work(context.Background(), job)
			require.Error(t, err)
			require.Equal(t, tc.permanent, jobs.IsPermanent(err), "%v", err)
		})
	}
}

func TestSMTPMailerRefusesInvalidEmail(t *testing.T) {
	t.Parallel()
	srv := startFakeSMTP(t, fakeSMTPConfig{})
	m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://" + srv.addr})
	require.NoError(t, err)
	err = m.Send(context.Background(), jobs.Email{To: []string{"a@example.com"}, Subject: "x\r\nBcc: evil@example.com", Text: "t"})
	require.ErrorIs(t, err, jobs.ErrPermanentDelivery)
	require.Contains(t, err.Error(), "subject")
	require.False(t, srv.sawCommand("MAIL"), "nothing may reach the server")
}

func TestSMTPMailerContextCancelAbortsStalledServer(t *testing.T) {
	t.Parallel()
	srv := startFakeSMTP(t, fakeSMTPConfig{stallData: true})
	m, err := NewSMTPMailer(SMTPConfig{URL: "smtp://" + srv.addr, Timeout: 30 * time.Second})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	err = m.Send(ctx, jobs.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"})
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, jobs.ErrPermanentDelivery)
	require.Less(t, time.Since(start), 5*time.Second, "cancellation must not wait for the I/O timeout")
}

// fakeSMTPConfig scripts the fake server's replies; empty means success.
type fakeSMTPConfig struct {
	greeting  string
	auth      bool   // advertise AUTH PLAIN LOGIN
	authReply string // may hold one %s, filled with the decoded credentials
	mailReply string
	rcptReply string
	dataReply string
	stallData bool // never answer the end of DATA
}

type fakeSMTP struct {
	addr string
	cfg  fakeSMTPConfig

	mu    sync.Mutex
	cmds  []string
	auths []string
}

func startFakeSMTP(t *testing.T, cfg fakeSMTPConfig) *fakeSMTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &fakeSMTP{addr: ln.Addr().String(), cfg: cfg}
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Range(func(k, _ any) bool { _ = k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conns.Delete(c)
				defer c.Close()
				s.serve(c)
			}()
		}
	}()
	return s
}

func (s *fakeSMTP) serve(c net.Conn) {
	r := bufio.NewReader(c)
	reply := func(def, custom string) {
		if custom != "" {
			def = custom
		}
		_, _ = fmt.Fprintf(c, "%s\r\n", def)
	}
	reply("220 fake ESMTP", s.cfg.greeting)
	if strings.HasPrefix(s.cfg.greeting, "5") || strings.HasPrefix(s.cfg.greeting, "4") {
		return
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		s.mu.Lock()
		s.cmds = append(s.cmds, line)
		s.mu.Unlock()
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch verb {
		case "EHLO", "HELO":
			ext := "250-fake\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n"
			if s.cfg.auth {
				ext += "250-AUTH PLAIN LOGIN\r\n"
			}
			_, _ = io.WriteString(c, ext+"250 HELP\r\n")
		case "AUTH":
			parts := strings.Fields(line)
			var resp string
			if len(parts) >= 3 {
				resp = parts[2]
			} else {
				_, _ = io.WriteString(c, "334 \r\n")
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				resp = strings.TrimSpace(l)
			}
			dec, _ := base64.StdEncoding.DecodeString(resp)
			s.mu.Lock()
			s.auths = append(s.auths, string(dec))
			s.mu.Unlock()
			if s.cfg.authReply != "" {
				reply("", fmt.Sprintf(s.cfg.authReply, dec))
			} else {
				reply("235 2.7.0 authenticated", "")
			}
		case "MAIL":
			reply("250 2.1.0 ok", s.cfg.mailReply)
		case "RCPT":
			reply("250 2.1.5 ok", s.cfg.rcptReply)
		case "DATA":
			reply("354 go ahead", "")
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" {
					break
				}
			}
			if s.cfg.stallData {
				_, _ = io.Copy(io.Discard, r) // until the client hangs up
				return
			}
			reply("250 2.0.0 queued", s.cfg.dataReply)
		case "RSET", "NOOP":
			reply("250 2.0.0 ok", "")
		case "QUIT":
			reply("221 2.0.0 bye", "")
			return
		default:
			reply("502 5.5.2 unknown command", "")
		}
	}
}

func (s *fakeSMTP) sawCommand(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cmds {
		if strings.HasPrefix(strings.ToUpper(c), prefix) {
			return true
		}
	}
	return false
}

func (s *fakeSMTP) sawAuth(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.auths {
		if strings.Contains(a, sub) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Integration with a real Mailpit server.

// mailpit returns a mailer for the test SMTP server and the Mailpit API base
// URL. TEST_SMTP_URL and TEST_MAILPIT_URL override the local defaults. An
// unreachable server fails the test, except in -short mode with neither
// variable set, where it skips.
func mailpit(t *testing.T) (*SMTPMailer, string) {
	t.Helper()
	smtpURL, smtpSet := os.LookupEnv("TEST_SMTP_URL")
	if smtpURL == "" {
		smtpURL = "smtp://127.0.0.1:1025"
	}
	apiURL, apiSet := os.LookupEnv("TEST_MAILPIT_URL")
	if apiURL == "" {
		apiURL = "http://127.0.0.1:8025"
	}
	apiURL = strings.TrimRight(apiURL, "/")

	m, err := NewSMTPMailer(SMTPConfig{URL: smtpURL, From: "Flint Test <flint-test@example.test>", Timeout: 10 * time.Second})
	require.NoError(t, err, "TEST_SMTP_URL")

	reachable := func() error {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(m.host, fmt.Sprint(m.port)), 3*time.Second)
		if err != nil {
			return fmt.Errorf("SMTP server %s: %w", m, err)
		}
		_ = c.Close()
		resp, err := httpClient.Get(apiURL + "/api/v1/info")
		if err != nil {
			return fmt.Errorf("Mailpit API %s: %w", apiURL, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("Mailpit API %s: status %s", apiURL, resp.Status)
		}
		return nil
	}
	if err := reachable(); err != nil {
		if testing.Short() && !smtpSet && !apiSet {
			t.Skipf("no Mailpit in -short mode: %v", err)
		}
		t.Fatalf("Mailpit is required for this test (set TEST_SMTP_URL and TEST_MAILPIT_URL, or run "+
			"mailpit --smtp 127.0.0.1:1025 --listen 127.0.0.1:8025; -short skips): %v", err)
	}
	return m, apiURL
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

type mailpitAddress struct {
	Name    string
	Address string
}

type mailpitMessage struct {
	ID      string
	From    *mailpitAddress
	To      []mailpitAddress
	Cc      []mailpitAddress
	Bcc     []mailpitAddress
	Subject string
	Text    string
	HTML    string
}

func mailpitGet(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := httpClient.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, body)
	if s, ok := v.(*[]byte); ok {
		*s = body
		return
	}
	require.NoError(t, json.Unmarshal(body, v), "GET %s", u)
}

// mailpitSearch returns the IDs of the messages addressed to addr.
func mailpitSearch(t *testing.T, api, addr string) []string {
	t.Helper()
	var res struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	mailpitGet(t, api+"/api/v1/search?query="+url.QueryEscape(`to:"`+addr+`"`), &res)
	ids := make([]string, len(res.Messages))
	for i, m := range res.Messages {
		ids[i] = m.ID
	}
	return ids
}

// awaitMessage waits for exactly one message to addr and returns it.
func awaitMessage(t *testing.T, api, addr string) mailpitMessage {
	t.Helper()
	var ids []string
	require.Eventually(t, func() bool {
		ids = mailpitSearch(t, api, addr)
		return len(ids) > 0
	}, 10*time.Second, 100*time.Millisecond, "no message to %s arrived", addr)
	require.Len(t, ids, 1, "one message to %s", addr)
	var msg mailpitMessage
	mailpitGet(t, api+"/api/v1/message/"+url.PathEscape(ids[0]), &msg)
	return msg
}

// normalizeBody undoes the transport's line ending changes: SMTP carries
// CRLF line breaks, and the last one is the message's, not the body's.
func normalizeBody(s string) string {
	return strings.TrimRight(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
}

func uniqueAddr(tag string) string {
	return fmt.Sprintf("flint-%s-%s@example.test", tag, uuid.NewString())
}

func TestSMTPMailerMailpitTextAndHTML(t *testing.T) {
	t.Parallel()
	m, api := mailpit(t)
	to := uniqueAddr("both")
	e := jobs.Email{
		To:      []string{"Test Recipient <" + to + ">"},
		Subject: "Flint test ✓ " + uuid.NewString(),
		Text:    "Hello in plain text.\nSecond line with ümlauts.",
		HTML:    "<p>Hello in <b>HTML</b>.</p>",
	}
	require.NoError(t, m.Send(context.Background(), e))

	got := awaitMessage(t, api, to)
	require.Equal(t, e.Subject, got.Subject)
	require.Len(t, got.To, 1)
	require.Equal(t, to, got.To[0].Address)
	require.Equal(t, "Test Recipient", got.To[0].Name)
	require.NotNil(t, got.From)
	require.Equal(t, "flint-test@example.test", got.From.Address)
	require.Equal(t, "Flint Test", got.From.Name)
	require.Equal(t, e.Text, normalizeBody(got.Text))
	require.Equal(t, e.HTML, normalizeBody(got.HTML))
	require.Empty(t, got.Cc)
	require.Empty(t, got.Bcc)

	// Both bodies travel as multipart/alternative.
	var raw []byte
	mailpitGet(t, api+"/api/v1/message/"+url.PathEscape(got.ID)+"/raw", &raw)
	parsed, err := netmail.ReadMessage(strings.NewReader(string(raw)))
	require.NoError(t, err)
	require.Contains(t, parsed.Header.Get("Content-Type"), "multipart/alternative")
}

func TestSMTPMailerMailpitSingleBody(t *testing.T) {
	t.Parallel()
	m, api := mailpit(t)
	for _, tc := range []struct {
		name string
		e    jobs.Email
	}{
		{"text", jobs.Email{Subject: "text only", Text: "just text"}},
		{"html", jobs.Email{Subject: "html only", HTML: "<i>just html</i>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			to := uniqueAddr(tc.name)
			tc.e.To = []string{to}
			require.NoError(t, m.Send(context.Background(), tc.e))
			got := awaitMessage(t, api, to)
			require.Equal(t, tc.e.Subject, got.Subject)
			if tc.e.HTML != "" {
				require.Equal(t, tc.e.HTML, normalizeBody(got.HTML))
			} else {
				require.Equal(t, tc.e.Text, normalizeBody(got.Text))
				require.Empty(t, got.HTML)
			}
		})
	}
}

func TestSMTPMailerMailpitMultipleRecipients(t *testing.T) {
	t.Parallel()
	m, api := mailpit(t)
	a, b := uniqueAddr("multi-a"), uniqueAddr("multi-b")
	require.NoError(t, m.Send(context.Background(), jobs.Email{To: []string{a, b}, Subject: "to two", Text: "t"}))
	got := awaitMessage(t, api, a)
	require.Len(t, got.To, 2)
	require.Equal(t, a, got.To[0].Address)
	require.Equal(t, b, got.To[1].Address)
	require.Len(t, mailpitSearch(t, api, b), 1)
}

// A subject carrying "\r\nBcc: ..." is refused by validation; and should
// anything skip validation, the encoder still keeps it inside the Subject
// header, so the delivered message has no Bcc header and no extra recipient.
func TestSMTPMailerMailpitHeaderInjection(t *testing.T) {
	t.Parallel()
	m, api := mailpit(t)
	to := uniqueAddr("inject")
	evil := uniqueAddr("evil")
	subject := "Hello\r\nBcc: " + evil + "\r\nX-Injected: yes"

	// Validation refuses it, at enqueue time and in the mailer.
	e := jobs.Email{To: []string{to}, Subject: subject, Text: "body"}
	require.Error(t, e.Validate())
	v := jobs.NewSendEmailHandler(m).(jobs.PayloadValidator)
	p, err := json.Marshal(map[string]any{"to": to, "subject": subject, "text": "body"})
	require.NoError(t, err)
	require.ErrorContains(t, v.ValidatePayload(p), `"subject"`)
	err = m.Send(context.Background(), e)
	require.ErrorIs(t, err, jobs.ErrPermanentDelivery)

	// Bypass validation and hand the message straight to the SMTP layer.
	msg, err := m.buildMsg(e)
	require.NoError(t, err)
	require.NoError(t, m.send(context.Background(), msg))

	got := awaitMessage(t, api, to)
	require.Len(t, got.To, 1)
	require.Equal(t, to, got.To[0].Address)
	require.Empty(t, got.Bcc)
	require.Empty(t, got.Cc)
	require.Contains(t, got.Subject, "Bcc: "+evil, "the injection attempt stays subject text")

	var headers map[string][]string
	mailpitGet(t, api+"/api/v1/message/"+url.PathEscape(got.ID)+"/headers", &headers)
	for k := range headers {
		require.NotEqual(t, "bcc", strings.ToLower(k), "no Bcc header may appear")
		require.NotEqual(t, "x-injected", strings.ToLower(k), "no injected header may appear")
	}
	require.Len(t, headers["Subject"], 1)

	var raw []byte
	mailpitGet(t, api+"/api/v1/message/"+url.PathEscape(got.ID)+"/raw", &raw)
	parsed, err := netmail.ReadMessage(strings.NewReader(string(raw)))
	require.NoError(t, err)
	require.Empty(t, parsed.Header["Bcc"])
	require.Empty(t, parsed.Header["X-Injected"])

	// And the would-be Bcc recipient got nothing.
	require.Empty(t, mailpitSearch(t, api, evil))
}

// The whole path: a send_email job's payload through the handler and the
// SMTP mailer into the mailbox.
func TestSendEmailHandlerMailpit(t *testing.T) {
	t.Parallel()
	m, api := mailpit(t)
	to := uniqueAddr("handler")
	subject := "Job " + uuid.NewString()
	p, err := json.Marshal(map[string]any{
		"to":      []string{to},
		"subject": subject,
		"text":    "Sent by a job.",
		"html":    "<p>Sent by a <em>job</em>.</p>",
	})
	require.NoError(t, err)

	h := jobs.NewSendEmailHandler(m)
	require.NoError(t, h.(jobs.PayloadValidator).ValidatePayload(p))
	job := &jobs.Job{ID: uuid.New(), Type: jobs.TypeSendEmail, Queue: jobs.DefaultQueue, Attempt: 1, Payload: p}
	res, err := h.Work(context.Background(), job)
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.JSONEq(t, fmt.Sprintf(`{"to": [%q], "accepted": true}`, to), string(b))

	got := awaitMessage(t, api, to)
	require.Equal(t, subject, got.Subject)
	require.Equal(t, "Sent by a job.", normalizeBody(got.Text))
	require.Equal(t, "<p>Sent by a <em>job</em>.</p>", normalizeBody(got.HTML))
}
