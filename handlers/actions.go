package handlers

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
)

// Operator actions, one path for the API and the dashboard: the same store
// call, the same wake-up and the same audit record whichever way they come.

// wakeFor wakes this process's workers once for each queue in which js
// made work ready, so an in-process pool does not wait for the
// notification round trip that wakes the others.
func (s *server) wakeFor(js ...*jobs.Job) {
	if s.wake == nil {
		return
	}
	seen := map[string]bool{}
	for _, j := range js {
		if j != nil && j.Status == jobs.StateQueued && !seen[j.Queue] {
			seen[j.Queue] = true
			s.wake(j.Queue)
		}
	}
}

// jobOp applies one action to one job: retry, cancel, delete (to the bin),
// restore or purge. Purge returns no job.
func (s *server) jobOp(ctx context.Context, action string, id uuid.UUID) (*jobs.Job, error) {
	var j *jobs.Job
	var err error
	switch action {
	case "retry":
		j, err = s.store.RetryJob(ctx, id)
	case "cancel":
		j, err = s.store.CancelJob(ctx, id)
	case "delete":
		j, err = s.store.DeleteJob(ctx, id)
	case "restore":
		j, err = s.store.RestoreJob(ctx, id)
	case "purge":
		err = s.store.PurgeJob(ctx, id)
	default:
		return nil, fmt.Errorf("unknown job action %q", action)
	}
	if err != nil {
		return nil, err
	}
	s.wakeFor(j)
	return j, nil
}

// seriesOp applies one action to a recurring series: pause, resume,
// run_now (an extra occurrence, returned) or delete. It records the action.
func (s *server) seriesOp(c *fiber.Ctx, action string, id uuid.UUID) (*jobs.Schedule, *jobs.Job, error) {
	ctx := c.UserContext()
	var sc *jobs.Schedule
	var j *jobs.Job
	var err error
	switch action {
	case "pause":
		sc, err = s.store.PauseSchedule(ctx, id)
	case "resume":
		sc, err = s.store.ResumeSchedule(ctx, id)
	case "run_now":
		j, err = s.store.RunScheduleNow(ctx, id)
	case "delete":
		err = s.store.DeleteSchedule(ctx, id)
	default:
		return nil, nil, fmt.Errorf("unknown series action %q", action)
	}
	if err != nil {
		return nil, nil, err
	}
	var occurrence []uuid.UUID
	if j != nil {
		s.wakeFor(j)
		occurrence = append(occurrence, j.ID)
	}
	s.audit(c, "series_"+action, map[string]string{"series": id.String()}, occurrence...)
	return sc, j, nil
}

// refusal is what an operator is told when an action is refused (a 4xx:
// not found, not allowed from the job's state), or nil when the error is
// the server's and must surface as one.
func refusal(err error) *apiError {
	if ae := toAPIError(err); ae.Status < 500 {
		return ae
	}
	return nil
}
