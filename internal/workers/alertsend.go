package workers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

// AlertSender delivers alert notifications: email through the mailer,
// webhooks as a signed JSON POST through the same SSRF guard as the
// http_request job (no proxy, no redirects).
type AlertSender struct {
	mailer domain.Mailer
	client *domain.GuardedClient
	now    func() time.Time
}

// NewAlertSender returns a sender. allow opens destinations the SSRF guard
// refuses (FLINT_HTTP_ALLOW entries); timeout bounds one webhook delivery
// (zero means 10 s). mailer may be nil when no email is to be sent.
func NewAlertSender(mailer domain.Mailer, allow []string, timeout time.Duration) (*AlertSender, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	client, err := domain.NewGuardedClient(allow, timeout)
	if err != nil {
		return nil, err
	}
	return &AlertSender{mailer: mailer, client: client, now: time.Now}, nil
}

// Send delivers one notification.
func (s *AlertSender) Send(ctx context.Context, m domain.Notification) error {
	switch m.Channel {
	case domain.ChannelWebhook:
		return s.postWebhook(ctx, m)
	case domain.ChannelEmail, "":
		if s.mailer == nil {
			return fmt.Errorf("email: this process has no mailer configured")
		}
		return s.mailer.Send(ctx, m.Email)
	}
	return fmt.Errorf("unknown channel %q", m.Channel)
}

func (s *AlertSender) postWebhook(ctx context.Context, m domain.Notification) error {
	body := []byte(m.Email.Text)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", withoutURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Flint-Alerts/1")
	// Signed by the Standard Webhooks scheme, as pushes are: the
	// message id is the delivery's (retries of one delivery share it, so
	// a receiver can drop repeats), or a fresh one for a test.
	id := "test-" + uuid.NewString()
	if m.ID != 0 {
		id = "alert-" + strconv.FormatInt(m.ID, 10)
		req.Header.Set("X-Flint-Delivery", strconv.FormatInt(m.ID, 10))
	}
	domain.WebhookHeaders(req.Header.Set, []string{m.WebhookSecret}, id, s.now(), body)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s: %s", resp.Status, domain.Truncate(domain.FirstLine(string(snippet)), 200))
	}
	return nil
}

// withoutURL drops the address a *url.Error quotes: a webhook's URL is
// often its credential, and the error is stored on the outbox row and
// shown to every reader of the Alerts page.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}
