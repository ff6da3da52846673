package workers

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	mail "github.com/wneessen/go-mail"

	"flint/jobs"
	"flint/logs"
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

// SMTPMailer delivers jobs.Email over SMTP. It is safe for concurrent use:
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

var _ jobs.Mailer = (*SMTPMailer)(nil)

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

func (m *SMTPMailer) parseURL(raw string) error {
	if strings.TrimSpace(raw) == "" {
		return errors.New("is empty; want smtp://[user:pass@]host:port or smtps://[user:pass@]host:port")
	}
	if jobs.HasControl(raw) {
		return errors.New("must not contain control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// *url.Error repeats the whole URL, password included; keep only
		// the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot be parsed: %v", err)
	}
	switch u.Scheme {
	case "smtp":
	case "smtps":
		m.implicitTLS = true
	case "":
		return errors.New("has no scheme; want smtp:// or smtps://")
	default:
		return fmt.Errorf("scheme must be smtp or smtps, not %q", u.Scheme)
	}
	if u.Opaque != "" {
		return fmt.Errorf("must be %s://host:port, with the slashes", u.Scheme)
	}
	m.host = u.Hostname()
	if m.host == "" {
		return errors.New("has no host")
	}
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("must not have a path, not %q", u.Path)
	}
	if u.Fragment != "" {
		return errors.New("must not have a fragment")
	}
	m.port = 25
	if m.implicitTLS {
		m.port = 465
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port must be between 1 and 65535, not %q", p)
		}
		m.port = n
	}
	if u.User != nil {
		m.hasAuth = true
		m.user = u.User.Username()
		m.password, _ = u.User.Password()
		if m.user == "" {
			return errors.New("has user info without a user name")
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fmt.Errorf("has a malformed query: %v", err)
	}
	m.tlsPolicy = mail.TLSOpportunistic
	for k, vs := range q {
		if k != "starttls" {
			return fmt.Errorf("unknown parameter %q (known: starttls)", k)
		}
		if len(vs) != 1 {
			return errors.New("starttls given more than once")
		}
		if m.implicitTLS {
			return errors.New("starttls applies to smtp:// only; smtps:// is always TLS")
		}
		switch vs[0] {
		case "required":
			m.tlsPolicy = mail.TLSMandatory
		case "opportunistic":
			m.tlsPolicy = mail.TLSOpportunistic
		case "none":
			m.tlsPolicy = mail.NoTLS
		default:
			return fmt.Errorf("starttls must be required, opportunistic or none, not %q", vs[0])
		}
	}
	m.redacted = u.Redacted()
	return nil
}

// String returns the server URL with the password masked, for logs.
func (m *SMTPMailer) String() string { return m.redacted }

// Send delivers e. It returns once the server has accepted the message, or
// with an error that wraps jobs.ErrPermanentDelivery when the server
// rejected the message for good (5xx to MAIL FROM, RCPT TO or DATA) or e
// breaks the send_email rules; other errors (connection, TLS,
// authentication, 4xx replies, ctx done) are temporary. Cancelling ctx
// aborts the exchange at once. Error texts never contain the password.
func (m *SMTPMailer) Send(ctx context.Context, e jobs.Email) error {
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
func (m *SMTPMailer) buildMsg(e jobs.Email) (*mail.Msg, error) {
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

func (m *SMTPMailer) send(ctx context.Context, msg *mail.Msg) error {
	// The connection is closed as soon as ctx is done, so that a stalled
	// server cannot hold a cancelled job for the whole I/O timeout.
	var (
		mu     sync.Mutex
		conn   net.Conn
		closed bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		closed = true
		if conn != nil {
			_ = conn.Close()
		}
	})
	defer stop()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if conn != nil {
			_ = conn.Close()
		}
	}()

	addr := net.JoinHostPort(m.host, strconv.Itoa(m.port))
	tlsConfig := &tls.Config{ServerName: m.host, MinVersion: tls.VersionTLS12}
	dial := func(dctx context.Context, network, _ string) (net.Conn, error) {
		d := &net.Dialer{}
		var c net.Conn
		var err error
		if m.implicitTLS {
			c, err = (&tls.Dialer{NetDialer: d, Config: tlsConfig}).DialContext(dctx, network, addr)
		} else {
			c, err = d.DialContext(dctx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			_ = c.Close()
			return nil, context.Cause(ctx)
		}
		conn = c
		return c, nil
	}

	opts := []mail.Option{
		mail.WithPort(m.port),
		mail.WithTimeout(m.timeout),
		mail.WithDialContextFunc(dial),
		mail.WithTLSConfig(tlsConfig),
	}
	if m.implicitTLS {
		// With a dial function of ours go-mail does not wrap the
		// connection itself; WithSSL only stops it from trying STARTTLS
		// on a connection that is already TLS.
		opts = append(opts, mail.WithSSL())
	} else {
		opts = append(opts, mail.WithTLSPolicy(m.tlsPolicy))
	}
	if m.hasAuth {
		opts = append(opts,
			mail.WithUsername(m.user),
			mail.WithPassword(m.password),
			// The first of these the server offers is used; if none,
			// go-mail picks the strongest mechanism it knows. PLAIN and
			// LOGIN refuse to run over plaintext unless the server is
			// localhost.
			mail.WithOpportunisticSMTPAuth(
				mail.SMTPAuthSCRAMSHA256, mail.SMTPAuthSCRAMSHA1,
				mail.SMTPAuthPlain, mail.SMTPAuthLogin,
			),
		)
	}
	client, err := mail.NewClient(m.host, opts...)
	if err != nil {
		return m.fail(ctx, "SMTP client setup", err)
	}
	sc, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return m.fail(ctx, "connecting to "+addr, err)
	}
	err = client.SendWithSMTPClient(sc, msg)
	if msg.IsDelivered() {
		// Accepted: whatever follows (RSET, QUIT) must not cause a retry
		// and so a second copy.
		_ = client.CloseWithSMTPClient(sc)
		return nil
	}
	_ = client.CloseWithSMTPClient(sc)
	if err == nil {
		err = errors.New("server did not confirm delivery")
	}
	return m.fail(ctx, "sending via "+addr, err)
}

// fail turns a go-mail error into a deliveryError: scrubbed of credentials,
// classified permanent or temporary.
func (m *SMTPMailer) fail(ctx context.Context, what string, err error) error {
	de := &deliveryError{msg: what + ": " + m.scrub(err.Error())}
	if cerr := ctx.Err(); cerr != nil {
		// A failure caused by cancellation is the cancellation, not a
		// verdict on the message.
		de.cause = context.Cause(ctx)
		de.msg = what + ": " + m.scrub(de.cause.Error())
		return de
	}
	var se *mail.SendError
	if errors.As(err, &se) {
		de.code = se.ErrorCode()
		switch se.Reason {
		case mail.ErrSMTPMailFrom, mail.ErrSMTPRcptTo, mail.ErrSMTPData, mail.ErrSMTPDataClose:
			de.permanent = de.code >= 500 && de.code <= 599
		case mail.ErrGetSender, mail.ErrGetRcpts, mail.ErrNoUnencoded:
			de.permanent = true
		}
	}
	return de
}

// scrub removes the password from s, in plain and URL-escaped form, and
// the password of any user info written in a URL.
func (m *SMTPMailer) scrub(s string) string {
	if m.password != "" {
		for _, p := range []string{m.password, url.QueryEscape(m.password), url.PathEscape(m.password), url.UserPassword("", m.password).String()[1:]} {
			if p != "" {
				s = strings.ReplaceAll(s, p, "xxxxx")
			}
		}
	}
	return logs.ScrubUserinfo(s)
}

// deliveryError is what SMTPMailer.Send returns. It keeps only scrubbed
// text: the go-mail error it came from is not reachable through it, so no
// caller can unwrap its way to a credential.
type deliveryError struct {
	msg       string
	code      int   // SMTP reply code, 0 if none
	permanent bool  // wraps jobs.ErrPermanentDelivery
	cause     error // context error, if ctx ended the attempt
}

func (e *deliveryError) Error() string { return e.msg }

func (e *deliveryError) Unwrap() []error {
	var out []error
	if e.permanent {
		out = append(out, jobs.ErrPermanentDelivery)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}
