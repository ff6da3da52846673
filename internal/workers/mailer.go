package workers

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/jobs"
)

// Defaults for SMTPConfig.
const (
	DefaultSMTPFrom    = "Flint <flint@localhost>"
	DefaultSMTPTimeout = 10 * time.Second
)

// SMTPConfig configures an SMTPMailer.
type SMTPConfig struct {
	// URL is smtp://[user:pass@]host[:port][?starttls=required|opportunistic|none]
	// or smtps://[user:pass@]host[:port] for implicit TLS. The port defaults
	// to 25 for smtp and 465 for smtps; starttls defaults to opportunistic.
	// With user info the mailer authenticates, picking a mechanism the
	// server offers (SCRAM, PLAIN, LOGIN, ...); PLAIN and LOGIN are only used
	// over TLS or to a localhost server.
	URL string
	// From is the sender, "Name <addr>" or a bare address. Default
	// DefaultSMTPFrom.
	From string
	// Timeout bounds dialling and each exchange with the server. Default
	// DefaultSMTPTimeout.
	Timeout time.Duration
}

// SMTPMailer delivers domain.Email over SMTP. It is safe for concurrent use:
// each Send opens its own connection.
type SMTPMailer struct {
	host        string
	port        int
	implicitTLS bool
	tlsPolicy   mail.TLSPolicy
	user        string
	password    string
	hasAuth     bool
	from        *netmail.Address
	timeout     time.Duration
	redacted    string
}

var _ domain.Mailer = (*SMTPMailer)(nil)

// NewSMTPMailer checks cfg and returns a mailer for it. No connection is
// made until Send. Errors say what is wrong without repeating the password.
func NewSMTPMailer(cfg SMTPConfig) (*SMTPMailer, error) {
	m := &SMTPMailer{timeout: cfg.Timeout}
	if err := m.parseURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("SMTP URL: %s", logs.ScrubUserinfo(err.Error()))
	}
	from := cfg.From
	if from == "" {
		from = DefaultSMTPFrom
	}
	if jobs.HasControl(from) {
		return nil, errors.New("SMTP From: must not contain line breaks or other control characters")
	}
	a, err := netmail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("SMTP From: %q is not a valid address: %s", from, strings.TrimPrefix(err.Error(), "mail: "))
	}
	if jobs.HasControl(a.Name) {
		return nil, errors.New("SMTP From: the name must not contain line breaks or other control characters")
	}
	m.from = a
	switch {
	case m.timeout < 0:
		return nil, fmt.Errorf("SMTP timeout must not be negative, not %s", m.timeout)
	case m.timeout == 0:
		m.timeout = DefaultSMTPTimeout
	}
	return m, nil
}

// String returns the server URL with the password masked, for logs.
func (m *SMTPMailer) String() string { return m.redacted }

// Send delivers e. It returns once the server has accepted the message, or
// with an error that wraps domain.ErrPermanentDelivery when the server
// rejected the message for good (5xx to MAIL FROM, RCPT TO or DATA) or e
// breaks the send_email rules; other errors (connection, TLS,
// authentication, 4xx replies, ctx done) are temporary. Cancelling ctx
// aborts the exchange at once. Error texts never contain the password.
func (m *SMTPMailer) Send(ctx context.Context, e domain.Email) error {
	if err := e.Validate(); err != nil {
		return &deliveryError{msg: "refusing to send: " + err.Error(), permanent: true}
	}
	msg, err := m.buildMsg(e)
	if err != nil {
		return &deliveryError{msg: "refusing to send: " + m.scrub(err.Error()), permanent: true}
	}
	return m.send(ctx, msg)
}

// buildMsg turns e into a MIME message: text/plain, text/html, or
// multipart/alternative with both.
func (m *SMTPMailer) buildMsg(e domain.Email) (*mail.Msg, error) {
	msg := mail.NewMsg(mail.WithNoDefaultUserAgent())
	msg.FromMailAddress(m.from)
	to := make([]*netmail.Address, len(e.To))
	for i, s := range e.To {
		a, err := netmail.ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("recipient %q: %w", s, err)
		}
		to[i] = a
	}
	msg.ToMailAddress(to...)
	// Subject goes through go-mail's RFC 2047 encoder, which turns any
	// control character into an encoded word, so even an unvalidated
	// subject cannot start a new header line.
	msg.Subject(e.Subject)
	msg.SetDate()
	msg.SetMessageIDWithValue(messageID(m.from.Address))
	switch {
	case e.Text != "" && e.HTML != "":
		msg.SetBodyString(mail.TypeTextPlain, e.Text)
		msg.AddAlternativeString(mail.TypeTextHTML, e.HTML)
	case e.HTML != "":
		msg.SetBodyString(mail.TypeTextHTML, e.HTML)
	default:
		msg.SetBodyString(mail.TypeTextPlain, e.Text)
	}
	return msg, nil
}

// messageID returns a fresh Message-ID value in the sender's domain.
func messageID(from string) string {
	domain := "localhost"
	if i := strings.LastIndexByte(from, '@'); i >= 0 && i+1 < len(from) {
		domain = from[i+1:]
	}
	return rand.Text() + "@" + domain
}
