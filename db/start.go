package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/flinthq/flint/jobs"
)

// startJobsSQL records that the handlers of buffered claims started: a
// claimed job becomes running. Each row is guarded by its lease token, as
// every write of a leased job is (see finishSQL for why no condition on
// the jobs row alone may join it), and a start already written is kept.
// A start is never put after the database's now.
const startJobsSQL = `
UPDATE jobs j SET started_at = coalesce(j.started_at, least(s.at, now()))
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS s(id, token, at)
WHERE j.id = s.id AND j.lease_token = s.token
RETURNING j.id, j.type, j.queue, j.attempt, j.batch_id`

// StartJobs records the starts of buffered claims (jobs.ClaimParams.
// Buffered) and announces each job as running. A start whose lease was
// lost writes nothing.
func (s *Store) StartJobs(ctx context.Context, starts []jobs.Start) error {
	if len(starts) == 0 {
		return nil
	}
	ids, tokens, ats := make([]uuid.UUID, len(starts)), make([]uuid.UUID, len(starts)), make([]time.Time, len(starts))
	for i, st := range starts {
		ids[i], tokens[i], ats[i] = st.JobID, st.Token, st.At
	}
	rows, err := s.pool.Query(ctx, startJobsSQL, uuidArray(ids), uuidArray(tokens), ats)
	if err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var events []jobs.Event
	for rows.Next() {
		ev := jobs.Event{Status: jobs.StateRunning, At: now}
		if err := rows.Scan(&ev.JobID, &ev.Type, &ev.Queue, &ev.Attempt, &ev.BatchID); err != nil {
			return fmt.Errorf("start jobs: %w", err)
		}
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	if len(events) > 0 && s.events != nil {
		s.events.Publish(events)
	}
	return nil
}
