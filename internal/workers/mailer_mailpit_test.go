package workers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	netmail "net/mail"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

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
	e := domain.Email{
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
		e    domain.Email
	}{
		{"text", domain.Email{Subject: "text only", Text: "just text"}},
		{"html", domain.Email{Subject: "html only", HTML: "<i>just html</i>"}},
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
	require.NoError(t, m.Send(context.Background(), domain.Email{To: []string{a, b}, Subject: "to two", Text: "t"}))
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
	e := domain.Email{To: []string{to}, Subject: subject, Text: "body"}
	require.Error(t, e.Validate())
	v := domain.NewSendEmailHandler(m).(jobs.PayloadValidator)
	p, err := json.Marshal(map[string]any{"to": to, "subject": subject, "text": "body"})
	require.NoError(t, err)
	require.ErrorContains(t, v.ValidatePayload(p), `"subject"`)
	err = m.Send(context.Background(), e)
	require.ErrorIs(t, err, domain.ErrPermanentDelivery)

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

	h := domain.NewSendEmailHandler(m)
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
