package handlers

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
)

// Every write made with a lease token (a heartbeat, a log line, a finish)
// checks who holds the lease, not only the token: a remote worker
// registered with the caller's key, or a push delivery of a queue the
// caller's key may work (the endpoint that answered 202 finishes the job
// through POST /api/v1/jobs/{id}/heartbeat and /finish). An admin key may
// act for any holder.

// errLeaseLost answers a write whose lease_token no longer holds its job.
var errLeaseLost = &apiError{Status: http.StatusConflict, Code: "lease_lost",
	Message: "this lease_token no longer holds the job (it finished, was reaped or claimed again); nothing was applied"}

// leaseHolder returns who holds l, refusing a caller that may not act for
// that holder.
func (s *server) leaseHolder(c *fiber.Ctx, l domain.Lease) (domain.LeaseHolder, error) {
	h, err := s.work.cfg.Store.LeaseHolder(c.UserContext(), l)
	if errors.Is(err, domain.ErrLeaseLost) {
		return h, errLeaseLost
	}
	if err != nil {
		return h, err
	}
	p, _ := principalOf(c)
	if auth.Grants(p.scopes, auth.ScopeAdmin) {
		return h, nil
	}
	if h.PushDelivery() {
		if p.queues != nil && !slices.Contains(p.queues, h.Queue) {
			return h, &apiError{Status: http.StatusForbidden, Code: "forbidden", Scope: string(auth.ScopeWork),
				Message: fmt.Sprintf("this key may work only the queues %v; the job is in %q", p.queues, h.Queue)}
		}
		return h, nil
	}
	w, err := s.work.cfg.Store.GetWorker(c.UserContext(), h.WorkerID)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		return h, err
	}
	if err == nil && w.Kind == domain.WorkerRemote && w.KeyID != nil && *w.KeyID == p.keyID {
		return h, nil
	}
	return h, &apiError{Status: http.StatusForbidden, Code: "forbidden", Scope: string(auth.ScopeWork),
		Message: "this lease is held by a worker this key did not register; only that worker's key may write with it"}
}

// jobLease reads the job id of the path and a lease_token into a lease.
func jobLease(c *fiber.Ctx, token *string) (domain.Lease, error) {
	id, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return domain.Lease{}, badRequest("invalid_id", "id", "the job id in the path must be a UUID")
	}
	idText := id.String()
	return leaseOf(&idText, token, func(name string) string { return name })
}

// jobHeartbeatRequest is the body of POST /api/v1/jobs/{id}/heartbeat.
type jobHeartbeatRequest struct {
	LeaseToken      *string `json:"lease_token"`
	Progress        *int    `json:"progress"`
	ProgressMessage *string `json:"progress_message"`
}

// jobHeartbeat handles POST /api/v1/jobs/{id}/heartbeat: the holder of a
// lease that is no registered worker's (a push endpoint that answered
// 202) extends it, with progress. It answers whether the lease is still
// held and whether cancellation was asked; a lost lease is 409.
func (s *server) jobHeartbeat(c *fiber.Ctx) error {
	var req jobHeartbeatRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	lease, err := jobLease(c, req.LeaseToken)
	if err != nil {
		return err
	}
	beat := domain.Heartbeat{Lease: lease}
	if beat.Progress, err = progressOf(req.Progress, req.ProgressMessage, func(name string) string { return name }); err != nil {
		return err
	}
	h, err := s.leaseHolder(c, lease)
	if err != nil {
		return err
	}
	wa := s.work
	statuses, err := wa.cfg.Store.ExtendLeasesWithin(c.UserContext(), []domain.Heartbeat{beat}, wa.cfg.LeaseTTL, wa.cfg.TimeoutGrace, h.WorkerID)
	if err != nil {
		return err
	}
	if len(statuses) == 0 {
		return errLeaseLost
	}
	return c.JSON(fiber.Map{"job_id": lease.JobID, "lease_seconds": wa.cfg.LeaseTTL.Seconds(),
		"cancel_requested": statuses[0].CancelRequested})
}

// jobFinish handles POST /api/v1/jobs/{id}/finish: the holder of a lease
// that is no registered worker's (a push endpoint that answered 202)
// ends the job. The body is one outcome of a worker's finish without
// job_id; the answer is as one entry of a worker's finish, and a lost
// lease is 409.
func (s *server) jobFinish(c *fiber.Ctx) error {
	var req outcomeRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.JobID != nil {
		return invalid("job_id", "the job is the one of the path; leave job_id out")
	}
	id := c.Params("id")
	req.JobID = &id
	f, refused, err := req.finish("", s.clock.Now())
	if err != nil {
		return err
	}
	if f.Spawn, err = s.parseSpawn(c, req.Spawn, "", s.clock.Now()); err != nil {
		return err
	}
	h, err := s.leaseHolder(c, f.Lease)
	if err != nil {
		return err
	}
	if f.Outcome == domain.OutcomeFailed && f.RetryDelay == 0 && !f.Final {
		f.RetryDelay = domain.Backoff(h.Attempt, nil)
	}
	traceSpawned(f.Spawn, req.Traceparent, h.Traceparent, f.Lease)
	wa := s.work
	finished, cascaded, err := wa.cfg.Store.FinishJobs(c.UserContext(), []domain.Finish{f})
	if err != nil {
		return err
	}
	domain.LogFailures(c.UserContext(), s.logger.With("worker_id", h.WorkerID), []domain.Finish{f}, finished)
	m := finished[0]
	if m.LeaseLost() {
		return errLeaseLost
	}
	if wa.cfg.OnMoved != nil {
		wa.cfg.OnMoved(append([]domain.Moved{m}, cascaded...))
	}
	out := outcomeResult{JobID: m.JobID, OK: refused == ""}
	if refused != "" {
		out.Error, out.Message = "result_refused", refused
	}
	return c.JSON(out)
}
