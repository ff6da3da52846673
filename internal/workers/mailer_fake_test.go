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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Behaviour against a scripted in-process SMTP server: authentication,
// permanent/temporary classification, cancellation.

func TestSMTPMailerAuthOnlyWithUserinfo(t *testing.T) {
	t.Parallel()
	e := domain.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"}

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
	e := domain.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"}
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
			require.NotErrorIs(t, err, domain.ErrPermanentDelivery)
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
			e := domain.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"}
			err = m.Send(context.Background(), e)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Equal(t, tc.permanent, errors.Is(err, domain.ErrPermanentDelivery), "%v", err)

			// Through the handler: permanent cancels, temporary retries.
			job := &jobs.Job{Attempt: 1, Payload: json.RawMessage(`{"to": "a@example.com", "subject": "s", "text": "t"}`)}
			_, err = domain.NewSendEmailHandler(m).Work(context.Background(), job)
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
	err = m.Send(context.Background(), domain.Email{To: []string{"a@example.com"}, Subject: "x\r\nBcc: evil@example.com", Text: "t"})
	require.ErrorIs(t, err, domain.ErrPermanentDelivery)
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
	err = m.Send(ctx, domain.Email{To: []string{"a@example.com"}, Subject: "s", Text: "t"})
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, domain.ErrPermanentDelivery)
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
	reply := func(def, custom string) { smtpReply(c, def, custom) }
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
			if !s.auth(c, r, line) {
				return
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

// auth answers an AUTH command (its response on the line or the next one),
// recording what the client sent; false means the client went.
func (s *fakeSMTP) auth(c net.Conn, r *bufio.Reader, line string) bool {
	reply := func(def, custom string) { smtpReply(c, def, custom) }
	parts := strings.Fields(line)
	var resp string
	if len(parts) >= 3 {
		resp = parts[2]
	} else {
		_, _ = io.WriteString(c, "334 \r\n")
		l, err := r.ReadString('\n')
		if err != nil {
			return false
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
	return true
}

// smtpReply writes the reply def, or custom where the test set one.
func smtpReply(c io.Writer, def, custom string) {
	if custom != "" {
		def = custom
	}
	_, _ = fmt.Fprintf(c, "%s\r\n", def)
}
