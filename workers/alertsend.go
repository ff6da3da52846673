package workers

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"flint/jobs"
)

// AlertSender delivers alert notifications: email through the mailer,
// webhooks as a signed JSON POST through the same SSRF guard as the
// http_request job (no proxy, no redirects).
type AlertSender struct {
	mailer jobs.Mailer
	client *jobs.GuardedClient
	now    func() time.Time
}

// NewAlertSender returns a sender. allow opens destinations the SSRF guard
// refuses (FLINT_HTTP_ALLOW entries); timeout bounds one webhook delivery
// (zero means 10 s). mailer may be nil when no email is to be sent.
func NewAlertSender(mailer jobs.Mailer, allow []string, timeout time.Duration) (*AlertSender, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	client, err := jobs.NewGuardedClient(allow, timeout)
	if err != nil {
		return nil, err
	}
	return &AlertSender{mailer: mailer, client: client, now: time.Now}, nil
}

// WebhookSignatureHeader carries a webhook body's signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the secret>".
// A receiver recomputes it and refuses old timestamps to stop replays.
const WebhookSignatureHeader = "X-Flint-Signature"

// SignWebhook returns the signature header value for body sent at t.
func SignWebhook(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Send delivers one notification.
func (s *AlertSender) Send(ctx context.Context, m jobs.Notification) error {
	switch m.Channel {
	case jobs.ChannelWebhook:
		return s.postWebhook(ctx, m)
	case jobs.ChannelEmail, "":
		if s.mailer == nil {
			return fmt.Errorf("email: this process has no mailer configured")
		}
		return s.mailer.Send(ctx, m.Email)
	}
	return fmt.Errorf("unknown channel %q", m.Channel)
}

func (s *AlertSender) postWebhook(ctx context.Context, m jobs.Notification) error {
	body := []byte(m.Email.Text)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Flint-Alerts/1")
	req.Header.Set(WebhookSignatureHeader, SignWebhook(m.WebhookSecret, s.now(), body))
	if m.ID != 0 {
		req.Header.Set("X-Flint-Delivery", strconv.FormatInt(m.ID, 10))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s: %s", resp.Status, jobs.Truncate(jobs.FirstLine(string(snippet)), 200))
	}
	return nil
}
