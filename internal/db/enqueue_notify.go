package db

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// enqueueNotifications are the notifications EnqueueTx sends for new jobs
// in the caller's transaction: one per queue that gained queued jobs, and
// the scheduled jobs in chunks of 90 (the format the waker sends).
func enqueueNotifications(queued []string, scheduled []*jobs.Job) (channels, notes []string) {
	for _, q := range queued {
		channels, notes = append(channels, ChannelJobs), append(notes, q)
	}
	for len(scheduled) > 0 {
		chunk := scheduled[:min(90, len(scheduled))]
		scheduled = scheduled[len(chunk):]
		parts := make([]string, len(chunk))
		for i, j := range chunk {
			parts[i] = timerPart(j.ID, j.RunAt, j.EffectivePriority, j.CreatedAt)
		}
		channels, notes = append(channels, ChannelScheduled), append(notes, strings.Join(parts, ","))
	}
	return channels, notes
}

// AnnounceTx queues, in the caller's transaction q, the events of jobs it
// enqueued with EnqueueTx: PostgreSQL delivers them to every API process
// (dashboard, SSE) when the transaction commits, and never if it rolls
// back, so no event is ever out of step with the database.
func AnnounceTx(ctx context.Context, q DBTX, enqueued []jobs.Enqueued) error {
	var inserted []*jobs.Job
	for _, e := range enqueued {
		if e.Inserted {
			inserted = append(inserted, e.Job)
		}
	}
	if len(inserted) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, notifyEventsSQL, ChannelEvents, notifyPayloads("tx", domain.EventsFromJobs(inserted, time.Now()))); err != nil {
		return fmt.Errorf("announce enqueued jobs: %w", err)
	}
	return nil
}
