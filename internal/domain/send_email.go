package domain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"unicode/utf8"

	"github.com/flinthq/flint/internal/jsonutil"
	"github.com/flinthq/flint/jobs"
)

// Limits on send_email payloads.
const (
	// MaxEmailRecipients is how many addresses one send_email job may name.
	MaxEmailRecipients = 50
	// MaxEmailAddressLen bounds one recipient as written in the payload.
	MaxEmailAddressLen = 320
	// MaxEmailSubjectLen is the longest subject in bytes: RFC 5322's limit
	// on a header line.
	MaxEmailSubjectLen = 998
	// MaxEmailBodyLen bounds the text and the HTML body each.
	MaxEmailBodyLen = 1 << 20
)

// ErrPermanentDelivery marks a delivery failure that no retry can fix: the
// mail server rejected the message, its sender or its recipients for good
// (an SMTP 5xx reply), or the message itself is unsendable. Mailers wrap
// such failures with it; the send_email handler then fails the job for good
// (to the dead-letter queue) instead of retrying it.
var ErrPermanentDelivery = errors.New("permanent delivery failure")

// Email is one message to deliver.
type Email struct {
	// To holds the recipients, each a bare address ("a@example.com") or a
	// named one ("Ann <a@example.com>").
	To []string
	// Subject is a single line of text.
	Subject string
	// Text and HTML are the bodies; at least one is set. With both, the
	// message is multipart/alternative.
	Text, HTML string
}

// Mailer delivers email. The workers package provides the SMTP one.
//
// Send returns nil once the server has accepted the message. A failure that
// a retry cannot fix wraps ErrPermanentDelivery; any other error is taken to
// be temporary.
type Mailer interface {
	// Send delivers e, giving up when ctx is done.
	Send(ctx context.Context, e Email) error
}

// Validate checks e against the send_email rules. Its messages name the
// payload field at fault ("to", "to[2]", "subject", "text", "html"). Mailers
// call it too, so that an Email built in code is held to the same rules as
// one decoded from a payload: in particular no header can be smuggled in
// through the subject or an address.
func (e Email) Validate() error {
	_, err := e.recipients()
	if err != nil {
		return err
	}
	if err := validateSubject(e.Subject); err != nil {
		return err
	}
	if e.Text == "" && e.HTML == "" {
		return errors.New(`needs "text" or "html" (or both), the message body`)
	}
	if err := validateBody("text", e.Text); err != nil {
		return err
	}
	return validateBody("html", e.HTML)
}

// Recipients parses e.To and returns the bare addresses, in order. It fails
// as Validate does on a bad recipient.
func (e Email) Recipients() ([]string, error) {
	addrs, err := e.recipients()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.Address
	}
	return out, nil
}

func (e Email) recipients() ([]*mail.Address, error) {
	switch {
	case len(e.To) == 0:
		return nil, errors.New(`needs "to", an address or a list of 1 to 50 addresses`)
	case len(e.To) > MaxEmailRecipients:
		return nil, fmt.Errorf(`"to" may name at most %d addresses, not %d`, MaxEmailRecipients, len(e.To))
	}
	field := func(i int) string {
		if len(e.To) == 1 {
			return "to"
		}
		return fmt.Sprintf("to[%d]", i)
	}
	out := make([]*mail.Address, len(e.To))
	for i, s := range e.To {
		a, err := parseRecipient(s)
		if err != nil {
			return nil, fmt.Errorf("%q %s", field(i), err)
		}
		out[i] = a
	}
	return out, nil
}

// parseRecipient parses one address with net/mail, refusing anything that
// could break out of the header it will be written to.
func parseRecipient(s string) (*mail.Address, error) {
	switch {
	case strings.TrimSpace(s) == "":
		return nil, errors.New("must not be empty")
	case len(s) > MaxEmailAddressLen:
		return nil, fmt.Errorf("must be at most %d bytes", MaxEmailAddressLen)
	case !utf8.ValidString(s):
		return nil, errors.New("must be valid UTF-8")
	case jobs.HasControl(s):
		return nil, errors.New("must not contain line breaks or other control characters")
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("is not a valid email address (%q): %s", s, strings.TrimPrefix(err.Error(), "mail: "))
	}
	// The display name may be an RFC 2047 encoded word, which the parser
	// decodes: "=?utf-8?q?x=0D=0ABcc:...?=" must not come back as a line
	// break either.
	if jobs.HasControl(a.Name) || jobs.HasControl(a.Address) {
		return nil, errors.New("must not contain line breaks or other control characters, encoded or not")
	}
	return a, nil
}

func validateSubject(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New(`needs "subject", a non-empty line of text`)
	case len(s) > MaxEmailSubjectLen:
		return fmt.Errorf(`"subject" must be at most %d bytes, not %d`, MaxEmailSubjectLen, len(s))
	case !utf8.ValidString(s):
		return errors.New(`"subject" must be valid UTF-8`)
	case jobs.HasControl(s):
		return errors.New(`"subject" must be a single line without CR, LF, NUL or other control characters`)
	}
	return nil
}

func validateBody(field, s string) error {
	switch {
	case len(s) > MaxEmailBodyLen:
		return fmt.Errorf("%q must be at most %d bytes, not %d", field, MaxEmailBodyLen, len(s))
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%q must not contain NUL characters", field)
	}
	return nil
}

// sendEmailPayload is {"to": "a@b.c" | ["a@b.c", ...], "subject": "...",
// "text": "...", "html": "..."}.
type sendEmailPayload struct {
	To      json.RawMessage `json:"to"`
	Subject *string         `json:"subject"`
	Text    string          `json:"text"`
	HTML    string          `json:"html"`
}

// decodeEmail decodes and validates a send_email payload.
func decodeEmail(payload json.RawMessage) (Email, error) {
	var p sendEmailPayload
	if err := jsonutil.DecodeStrict(payload, &p); err != nil {
		return Email{}, err
	}
	to, err := decodeRecipients(p.To)
	if err != nil {
		return Email{}, err
	}
	if p.Subject == nil {
		return Email{}, errors.New(`needs "subject", a non-empty line of text`)
	}
	e := Email{To: to, Subject: *p.Subject, Text: p.Text, HTML: p.HTML}
	if err := e.Validate(); err != nil {
		return Email{}, err
	}
	return e, nil
}

// decodeRecipients accepts "to" as one string or a list of strings.
func decodeRecipients(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New(`needs "to", an address or a list of 1 to 50 addresses`)
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf(`"to" is not a valid JSON string: %s`, jsonutil.DescribeJSONError(err))
		}
		return []string{s}, nil
	case '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf(`"to" is not a valid JSON list: %s`, jsonutil.DescribeJSONError(err))
		}
		if len(list) == 0 {
			return nil, errors.New(`"to" must name at least one address`)
		}
		if len(list) > MaxEmailRecipients {
			return nil, fmt.Errorf(`"to" may name at most %d addresses, not %d`, MaxEmailRecipients, len(list))
		}
		out := make([]string, len(list))
		for i, item := range list {
			if item[0] != '"' || json.Unmarshal(item, &out[i]) != nil {
				return nil, fmt.Errorf(`"to[%d]" must be a string`, i)
			}
		}
		return out, nil
	default:
		return nil, errors.New(`"to" must be an address or a list of addresses`)
	}
}

type sendEmailHandler struct{ mailer Mailer }

// NewSendEmailHandler returns the send_email handler, which delivers
// {"to", "subject", "text", "html"} through m. It also implements
// PayloadValidator. A rejection that no retry can fix (see
// ErrPermanentDelivery) fails the job for good; any other failure is retried. It
// panics if m is nil.
func NewSendEmailHandler(m Mailer) jobs.Handler {
	if m == nil {
		panic("jobs: NewSendEmailHandler needs a Mailer")
	}
	return sendEmailHandler{mailer: m}
}

// ValidatePayload checks the payload at enqueue time.
func (sendEmailHandler) ValidatePayload(payload json.RawMessage) error {
	_, err := decodeEmail(payload)
	return err
}

// Work sends the message and returns {"to": [addresses], "accepted": true}.
func (h sendEmailHandler) Work(ctx context.Context, job *jobs.Job) (any, error) {
	e, err := decodeEmail(job.Payload)
	if err != nil {
		return nil, jobs.Permanent(fmt.Errorf("bad payload: %v", err))
	}
	to, err := e.Recipients()
	if err != nil {
		return nil, jobs.Permanent(fmt.Errorf("bad payload: %v", err))
	}
	log := jobs.Logger(ctx)
	log.Info(fmt.Sprintf("sending %q to %d recipient(s)", e.Subject, len(to)), "to", strings.Join(to, ", "))
	if err := h.mailer.Send(ctx, e); err != nil {
		if errors.Is(err, ErrPermanentDelivery) {
			log.Error("the mail server refused the message for good", "error", err.Error())
			return nil, jobs.Permanent(err)
		}
		log.Warn("delivery failed; it will be retried", "error", err.Error())
		return nil, err
	}
	log.Info("the mail server accepted the message")
	return map[string]any{"to": to, "accepted": true}, nil
}
