package jobs

import (
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
}

// AlertDelivery is how sending a test notification to one channel went.
type AlertDelivery struct {
	Channel string `json:"channel"`
	Target  string `json:"target"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}
