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

// AlertRecord is an alert email in the outbox.
type AlertRecord struct {
	ID         int64
	CreatedAt  time.Time
	Recipients []string
	Subject    string
	Attempts   int
	SentAt     *time.Time
	FailedAt   *time.Time
	LastError  string
}
