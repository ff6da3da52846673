package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// DLQSnapshot is the state of the dead-letter queue an alert reports.
type DLQSnapshot struct {
	Count     int64
	Threshold int
	Recent    []DLQJob // the ten most recent, newest first
}

// DLQJob is one dead-letter job in an alert.
type DLQJob struct {
	ID       uuid.UUID
	Type     string
	Error    string
	Attempts int
	FailedAt time.Time
}

// Notification channels.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
)

// Notification is one message of an alert to one channel: an email, or a
// webhook's JSON body, its address and the secret that signs it.
type Notification struct {
	ID            int64 // its outbox id, once stored
	Channel       string
	Email         Email // for a webhook: Subject summarises, Text is the JSON body
	WebhookURL    string
	WebhookSecret string
}

// AlertRecord is an alert notification in the outbox.
type AlertRecord struct {
	ID         int64
	CreatedAt  time.Time
	Channel    string
	AlertID    *int64
	Recipients []string // an email's; a webhook's address is WebhookURL
	WebhookURL string
	Subject    string
	Attempts   int
	SentAt     *time.Time
	FailedAt   *time.Time
	LastError  string
	// RuleName and AlertSubject name the alert it notified of, if any.
	RuleName     string
	AlertSubject string
}

// AlertDelivery is how sending a test notification to one channel went.
type AlertDelivery struct {
	Channel string `json:"channel"`
	Target  string `json:"target"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// RedactURL shows where a URL points without what may make it a
// credential: a webhook's path, query and user info are often its secret
// (Slack's, Discord's, a token in the query), so only the scheme and host
// are kept and the rest becomes "/…". A URL that does not parse is hidden
// whole.
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		out += "/…"
	}
	return out
}

// RedactURLIn replaces each appearance of raw in text (a delivery's error,
// which may quote the address it failed to reach) with RedactURL(raw).
func RedactURLIn(text, raw string) string {
	if raw == "" || text == "" {
		return text
	}
	return strings.ReplaceAll(text, raw, RedactURL(raw))
}

// URLFingerprint is a short hash of a URL, kept where the URL itself must
// not be: two entries with the same fingerprint name the same address.
func URLFingerprint(raw string) string {
	if raw == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:4])
}

// Alert is what a rule found: open while its condition holds, resolved
// once it stops.
type Alert struct {
	ID             int64     `json:"id"`
	RuleID         int64     `json:"rule_id"`
	RuleName       string    `json:"rule_name"`
	Kind           AlertKind `json:"kind"`
	Subject        string    `json:"subject"`
	Value          float64   `json:"value"`
	Message        string    `json:"message"`
	FiredAt        time.Time `json:"fired_at"`
	LastNotifiedAt time.Time `json:"last_notified_at"`
	// Notifications counts the times it notified someone: its firing and
	// repeats that queued an email or webhook (0 when its rule reaches
	// nobody).
	Notifications int        `json:"notifications"`
	ResolvedAt    *time.Time `json:"resolved_at"`
}

// Firing reports whether the alert's condition still holds.
func (a *Alert) Firing() bool { return a.ResolvedAt == nil }

// AlertQuery selects alerts for a listing, newest first.
type AlertQuery struct {
	// Status is "firing", "resolved" or empty for both.
	Status string
	RuleID int64
	Before int64 // an alert id: older ones only
	Limit  int
}

// AlertEvent is what a notification reports: an alert that fired, fires
// still, resolved, or a test.
type AlertEvent string

// The notification events.
const (
	AlertFiring   AlertEvent = "firing"
	AlertRepeat   AlertEvent = "repeat"
	AlertResolved AlertEvent = "resolved"
	AlertTest     AlertEvent = "test"
)

// AlertNotice is one notification to render for a rule's channels.
type AlertNotice struct {
	Event AlertEvent
	Rule  AlertRule
	Alert Alert
}
