package domain

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// The last_error of a series' pending occurrence cancelled because the
// series was paused or deleted.
const (
	SeriesPausedError  = "cancelled: the recurring series was paused"
	SeriesDeletedError = "cancelled: the recurring series was deleted"
)

// Schedule is a recurring series. The series never runs itself: it always
// has exactly one pending occurrence, a scheduled job, and each occurrence
// that becomes due is followed by the next.
type Schedule struct {
	ID uuid.UUID `json:"id"`
	// Type, Queue, Payload, Priority, MaxRetries and TimeoutSeconds are
	// given to every occurrence, as EnqueueParams would give them.
	Type           string          `json:"type"`
	Queue          string          `json:"queue"`
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority"`
	MaxRetries     int             `json:"max_retries"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	// IntervalSeconds or Cron (read in Timezone) is the series' rule;
	// exactly one is set.
	IntervalSeconds int64  `json:"interval_seconds,omitempty"`
	Cron            string `json:"cron,omitempty"`
	Timezone        string `json:"timezone"`
	// Paused says no occurrence is released until the series is resumed.
	Paused bool `json:"paused"`
	// LastRunAt is when the latest occurrence that ran started (an
	// occurrence released but not run, cancelled or waiting in a paused
	// queue, does not count); NextRunAt is the target time of the pending
	// one.
	LastRunAt *time.Time `json:"last_run_at,omitempty"`
	NextRunAt *time.Time `json:"next_run_at,omitempty"`
	// QueuePaused says the series' queue is paused: its occurrences are
	// released and wait there unrun. Waiting counts the occurrences that
	// wait in the queue. Both are read with the series, not stored.
	QueuePaused bool      `json:"queue_paused"`
	Waiting     int64     `json:"occurrences_waiting"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// NextFire returns the target time of the occurrence that follows last
// (the target of the latest occurrence, nil if there is none), judged at
// now. Missed firings coalesce: a series whose scheduler was down for a day
// runs once when it comes back, then resumes its rhythm.
//
//   - interval series stay on their grid: last + k×interval, the first such
//     time after now;
//   - cron series fire at the first matching time after the later of last
//     and now, with the daylight-saving policy of CronSchedule.
func (s *Schedule) NextFire(last *time.Time, now time.Time) (time.Time, error) {
	switch {
	case s.IntervalSeconds > 0:
		every := time.Duration(s.IntervalSeconds) * time.Second
		if last == nil {
			return now, nil
		}
		return NextInterval(*last, now, every), nil
	case s.Cron != "":
		cs, err := jobs.ParseCron(s.Cron, s.Timezone)
		if err != nil {
			return time.Time{}, err
		}
		from := now
		if last != nil && last.After(now) {
			from = *last
		}
		next := cs.Next(from)
		if next.IsZero() {
			return time.Time{}, errors.New("cron expression never fires again")
		}
		return next, nil
	default:
		return time.Time{}, errors.New("schedule has neither interval_seconds nor cron")
	}
}
