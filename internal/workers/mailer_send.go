package workers

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"

	mail "github.com/wneessen/go-mail"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
)

// abortableConn holds the connection of one exchange with the server, so
// that it can be closed from outside the exchange the moment its context
// is done: a stalled server cannot then hold a cancelled job for the whole
// I/O timeout.
type abortableConn struct {
	mu      sync.Mutex
	conn    net.Conn
	aborted bool
}

// abort closes the connection, and any connection adopted later.
func (c *abortableConn) abort() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.aborted = true
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// close closes the connection, if one was made.
func (c *abortableConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// adopt makes nc the exchange's connection, or closes it and returns
// ctx's cause if the exchange was aborted while it was being dialled.
func (c *abortableConn) adopt(ctx context.Context, nc net.Conn) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted {
		_ = nc.Close()
		return nil, context.Cause(ctx)
	}
	c.conn = nc
	return nc, nil
}

// send delivers msg in one exchange with the server, aborted as soon as
// ctx is done.
func (m *SMTPMailer) send(ctx context.Context, msg *mail.Msg) error {
	var conn abortableConn
	stop := context.AfterFunc(ctx, conn.abort)
	defer stop()
	defer conn.close()

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
		return conn.adopt(ctx, c)
	}
	client, err := mail.NewClient(m.host, m.clientOptions(dial, tlsConfig)...)
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

// clientOptions are the go-mail options for one exchange: dial is the
// connection's dial function, tlsConfig the TLS settings for the server.
func (m *SMTPMailer) clientOptions(dial mail.DialContextFunc, tlsConfig *tls.Config) []mail.Option {
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
	return opts
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
	permanent bool  // wraps domain.ErrPermanentDelivery
	cause     error // context error, if ctx ended the attempt
}

func (e *deliveryError) Error() string { return e.msg }

func (e *deliveryError) Unwrap() []error {
	var out []error
	if e.permanent {
		out = append(out, domain.ErrPermanentDelivery)
	}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	return out
}
