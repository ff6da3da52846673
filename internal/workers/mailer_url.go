package workers

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	mail "github.com/wneessen/go-mail"

	"github.com/flinthq/flint/jobs"
)

// parseURL reads SMTPConfig.URL into m: scheme, host and port, user info
// and the starttls policy. Its errors may contain the user name but never
// the password.
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
	if err := m.parseAddress(u); err != nil {
		return err
	}
	if u.User != nil {
		m.hasAuth = true
		m.user = u.User.Username()
		m.password, _ = u.User.Password()
		if m.user == "" {
			return errors.New("has user info without a user name")
		}
	}
	if err := m.parseTLSPolicy(u.RawQuery); err != nil {
		return err
	}
	m.redacted = u.Redacted()
	return nil
}

// parseAddress reads the scheme (smtps means implicit TLS), the host and
// the port (25 or 465 when none is given), and refuses a path or a
// fragment.
func (m *SMTPMailer) parseAddress(u *url.URL) error {
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
	return nil
}

// parseTLSPolicy reads the query: starttls=required|opportunistic|none,
// opportunistic when absent, and only for smtp://. parseAddress must have
// run first.
func (m *SMTPMailer) parseTLSPolicy(rawQuery string) error {
	q, err := url.ParseQuery(rawQuery)
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
	return nil
}
