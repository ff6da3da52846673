package handlers

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Operator actions, one path for the API and the dashboard: the same store
// call, the same wake-up and the same audit record whichever way they come.

// wakeFor wakes this process's workers once for each queue in which js
// made work ready, so an in-process pool does not wait for the
// notification round trip that wakes the others.
func (s *server) wakeFor(js ...*jobs.Job) {
	seen := map[string]bool{}
	for _, j := range js {
		if j != nil && j.Status == jobs.StateQueued && !seen[j.Queue] {
			seen[j.Queue] = true
			s.wakeQueue(j.Queue)
		}
	}
}

// wakeQueue wakes this process's workers and long polls of queue at once:
// a job there became ready (the notification through PostgreSQL wakes
// the other processes').
func (s *server) wakeQueue(queue string) {
	if s.wake != nil {
		s.wake(queue)
	}
	if s.work != nil {
		s.work.cfg.Hub.Wake(queue)
	}
}

// jobAction is what an operator can do to a job. Its value is the name in
// URLs, forms and the audit trail.
type jobAction string

const (
	jobRetry   jobAction = "retry"
	jobCancel  jobAction = domain.AuditCancel
	jobDelete  jobAction = "delete" // to the bin
	jobRestore jobAction = "restore"
	jobPurge   jobAction = "purge" // out of the bin, for good
)

// jobActions lists every job action, for routes.
var jobActions = []jobAction{jobCancel, jobRetry, jobDelete, jobRestore, jobPurge}

// past is the action as done, for toasts: "Retried".
func (a jobAction) past() string {
	return map[jobAction]string{jobRetry: "Retried", jobCancel: "Cancelled", jobDelete: "Moved to the bin",
		jobRestore: "Restored", jobPurge: "Purged"}[a]
}

// seriesAction is what an operator can do to a recurring series. Its value
// is the name in URLs; the audit trail says series_<audit name>.
type seriesAction string

const (
	seriesPause  seriesAction = "pause"
	seriesResume seriesAction = "resume"
	seriesRunNow seriesAction = "run" // one extra occurrence, now
	seriesDelete seriesAction = "delete"
)

var seriesActions = []seriesAction{seriesPause, seriesResume, seriesRunNow, seriesDelete}

// auditName is the action's name in the audit trail.
func (a seriesAction) auditName() string {
	switch a {
	case seriesRunNow:
		return "series_run_now"
	case seriesPause:
		return domain.AuditSeriesPause
	case seriesDelete:
		return domain.AuditSeriesDelete
	}
	return "series_" + string(a)
}

// jobOp applies one action to one job. Purge returns no job.
func (s *server) jobOp(ctx context.Context, action jobAction, id uuid.UUID) (*jobs.Job, error) {
	var j *jobs.Job
	var err error
	switch action {
	case jobRetry:
		j, err = s.jobActionStore.RetryJob(ctx, id)
	case jobCancel:
		j, err = s.jobActionStore.CancelJob(ctx, id)
	case jobDelete:
		j, err = s.jobActionStore.DeleteJob(ctx, id)
	case jobRestore:
		j, err = s.jobActionStore.RestoreJob(ctx, id)
	case jobPurge:
		err = s.jobActionStore.PurgeJob(ctx, id)
	default:
		return nil, fmt.Errorf("unknown job action %q", action)
	}
	if err != nil {
		return nil, err
	}
	s.wakeFor(j)
	return j, nil
}

// seriesOp applies one action to a recurring series (run now returns the
// extra occurrence). It records the action, with the occurrence it made or
// cancelled, so that the occurrence's own history says who did it.
func (s *server) seriesOp(c *fiber.Ctx, action seriesAction, id uuid.UUID) (*domain.Schedule, *jobs.Job, error) {
	ctx := c.UserContext()
	var sc *domain.Schedule
	var j *jobs.Job
	var occurrence []uuid.UUID
	var err error
	switch action {
	case seriesPause:
		sc, occurrence, err = s.scheduleStore.PauseSchedule(ctx, id)
	case seriesResume:
		sc, err = s.scheduleStore.ResumeSchedule(ctx, id)
	case seriesRunNow:
		j, err = s.scheduleStore.RunScheduleNow(ctx, id)
	case seriesDelete:
		occurrence, err = s.scheduleStore.DeleteSchedule(ctx, id)
	default:
		return nil, nil, fmt.Errorf("unknown series action %q", action)
	}
	if err != nil {
		return nil, nil, err
	}
	if j != nil {
		s.wakeFor(j)
		occurrence = append(occurrence, j.ID)
	}
	s.audit(c, action.auditName(), map[string]string{"series": id.String()}, occurrence...)
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
