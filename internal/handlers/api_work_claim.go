package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// claimRequest is the body of POST /api/v1/workers/{id}/claim.
type claimRequest struct {
	Max         *int     `json:"max"`
	WaitSeconds *float64 `json:"wait_seconds"`
}

// claimedJob is a job as a remote worker receives it, with its lease.
type claimedJob struct {
	ID             uuid.UUID       `json:"id"`
	Type           string          `json:"type"`
	Queue          string          `json:"queue"`
	Payload        json.RawMessage `json:"payload"`
	Attempt        int             `json:"attempt"`
	MaxRetries     int             `json:"max_retries"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	LeaseToken     uuid.UUID       `json:"lease_token"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at"`
	ConcurrencyKey *string         `json:"concurrency_key"`
	// Parents holds the results of the job's direct dependencies (by step
	// key, or job id outside its workflow), for a job that has any.
	Parents jobs.Parents `json:"parents,omitempty"`
	// Steps holds the steps earlier attempts recorded (name → result, in
	// their order) and Signals what resumed the job's waits (name →
	// {"body", "at"} or {"timed_out": true}), for a durable job.
	Steps   domain.StepsWire       `json:"steps,omitempty"`
	Signals map[string]jobs.Signal `json:"signals,omitempty"`
	// Traceparent is the W3C trace context of this attempt (with tracing
	// on): the worker parents its spans on it and reports it back with
	// the outcome, and Flint records the attempt's span under that id.
	Traceparent string `json:"traceparent,omitempty"`
}

func claimedJobOf(j *jobs.Job) claimedJob {
	out := claimedJob{ID: j.ID, Type: j.Type, Queue: j.Queue, Payload: j.Payload, Attempt: j.Attempt, MaxRetries: j.MaxRetries,
		TimeoutSeconds: j.TimeoutSeconds, LeaseExpiresAt: j.LeaseExpiresAt, ConcurrencyKey: j.ConcurrencyKey, Parents: j.Parents,
		Steps: j.Steps, Signals: j.Signals}
	if j.LeaseToken != nil {
		out.LeaseToken = *j.LeaseToken
	}
	out.Traceparent = tracing.AttemptTraceparent(j.Traceparent, out.LeaseToken)
	return out
}

// claimWork handles POST /api/v1/workers/{id}/claim: up to max jobs of
// the worker's types and queues, waiting up to wait_seconds for work. The
// wait holds no database connection.
func (s *server) claimWork(c *fiber.Ctx) error {
	var req claimRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	max, wait := 1, time.Duration(0)
	if req.Max != nil {
		if *req.Max < 1 || *req.Max > maxClaim {
			return invalid("max", fmt.Sprintf("must be between 1 and %d", maxClaim))
		}
		max = *req.Max
	}
	if req.WaitSeconds != nil {
		if math.IsNaN(*req.WaitSeconds) || *req.WaitSeconds < 0 || *req.WaitSeconds > maxWaitSeconds {
			return invalid("wait_seconds", fmt.Sprintf("must be between 0 and %d", maxWaitSeconds))
		}
		wait = time.Duration(*req.WaitSeconds * float64(time.Second))
	}
	w, err := s.worker(c)
	if err != nil {
		return err
	}
	wa := s.work
	out := []claimedJob{}
	if w.State != domain.WorkerRunning {
		return c.JSON(fiber.Map{"jobs": out}) // quiet or terminating: no new work
	}
	// The wait outlives the request timeout's budget for database work:
	// each claim gets a timeout of its own.
	deadline := time.Now().Add(wait)
	for {
		claimed, err := s.claimOnce(w, max)
		if err != nil {
			return err
		}
		if len(claimed) > 0 {
			if len(claimed) == max {
				wa.cfg.Hub.chain(hubSig(w)) // more may be waiting for the next worker
			}
			for _, j := range claimed {
				out = append(out, claimedJobOf(j))
			}
			return c.JSON(fiber.Map{"jobs": out})
		}
		left := time.Until(deadline)
		if left <= 0 || s.base.Err() != nil {
			return c.JSON(fiber.Map{"jobs": out})
		}
		wa.cfg.Hub.waitFor(s.base, w.ID, hubSig(w), w.Queues, left)
		// The worker may have been deregistered, quieted or terminated
		// meanwhile (the hub kicks it): a worker that stopped breaks its
		// long poll off without the API knowing, and this wait must not
		// go on to claim for it. (The request's own context may have run
		// out during a long wait, as it may for the claim.)
		ctx, cancel := context.WithTimeout(s.base, wa.cfg.LeaseTTL)
		w, err = s.workerWithin(ctx, c)
		cancel()
		if err != nil {
			return err
		}
		if w.State != domain.WorkerRunning {
			return c.JSON(fiber.Map{"jobs": out})
		}
	}
}

// hubSig is the set a worker waits in: its queues and types.
func hubSig(w domain.WorkerInfo) string {
	return strings.Join(w.Queues, ",") + "|" + strings.Join(w.Types, ",")
}

// claimOnce claims for w in one of the hub's slots.
func (s *server) claimOnce(w domain.WorkerInfo, max int) ([]*jobs.Job, error) {
	wa := s.work
	ctx, cancel := context.WithTimeout(s.base, wa.cfg.LeaseTTL)
	defer cancel()
	release, err := wa.cfg.Hub.claimSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return wa.cfg.Store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: w.ID, Queues: w.Queues, Types: w.Types, Limit: max, LeaseTTL: wa.cfg.LeaseTTL})
}

// heartbeatRequest is the body of POST /api/v1/workers/{id}/heartbeat.
type heartbeatRequest struct {
	Leases []struct {
		JobID           *string `json:"job_id"`
		LeaseToken      *string `json:"lease_token"`
		Progress        *int    `json:"progress"`
		ProgressMessage *string `json:"progress_message"`
	} `json:"leases"`
}

// workerHeartbeat handles POST /api/v1/workers/{id}/heartbeat: the worker
// stays in the registry, every lease it still holds is extended, and it
// learns which it lost (or whose cancellation was asked) and whether it
// should quiet down or stop.
func (s *server) workerHeartbeat(c *fiber.Ctx) error {
	var req heartbeatRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if len(req.Leases) > maxLeasesPerBeat {
		return invalid("leases", fmt.Sprintf("lists %d leases; the limit is %d", len(req.Leases), maxLeasesPerBeat))
	}
	beats := make([]domain.Heartbeat, len(req.Leases))
	for i, l := range req.Leases {
		f := func(name string) string { return fmt.Sprintf("leases[%d].%s", i, name) }
		lease, err := leaseOf(l.JobID, l.LeaseToken, f)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(beats[:i], func(b domain.Heartbeat) bool { return b.JobID == lease.JobID }) {
			return invalid(f("job_id"), "lists a job twice")
		}
		beats[i] = domain.Heartbeat{Lease: lease}
		if beats[i].Progress, err = progressOf(l.Progress, l.ProgressMessage, f); err != nil {
			return err
		}
	}
	w, err := s.worker(c)
	if err != nil {
		return err
	}
	wa := s.work
	ctx := c.UserContext()
	w.HeartbeatAt = s.clock.Now()
	// Only a registered worker's entry is refreshed: a heartbeat racing
	// the worker's deregistration must not bring it back.
	state, err := wa.cfg.Store.RemoteWorkerHeartbeat(ctx, w, remoteWorkerTTL*wa.cfg.HeartbeatInterval)
	if errors.Is(err, domain.ErrNotFound) {
		wa.cache.Delete(w.ID)
		return &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: "no such worker: it deregistered or was never registered; register again (POST /api/v1/workers)"}
	}
	if err != nil {
		return err
	}
	w.State = state
	wa.cache.Store(w.ID, cachedWorker{info: w, at: time.Now()})
	lost := []uuid.UUID{}
	if len(beats) > 0 {
		statuses, err := wa.cfg.Store.ExtendLeasesWithin(ctx, beats, wa.cfg.LeaseTTL, wa.cfg.TimeoutGrace, w.ID)
		if err != nil {
			return err
		}
		held := make(map[uuid.UUID]bool, len(statuses))
		for _, st := range statuses {
			held[st.JobID] = !st.CancelRequested
		}
		for _, b := range beats {
			if !held[b.JobID] {
				lost = append(lost, b.JobID)
			}
		}
	}
	return c.JSON(fiber.Map{"state": state, "lost": lost})
}

// progressOf checks the progress a heartbeat reports (nil when it
// reports none); field names the fields in errors. The message is
// scrubbed of secrets where it is stored.
func progressOf(percent *int, message *string, field func(string) string) (*domain.Progress, error) {
	if percent == nil && message == nil {
		return nil, nil
	}
	pr := &domain.Progress{}
	if percent != nil {
		if *percent < 0 || *percent > 100 {
			return nil, invalid(field("progress"), "must be between 0 and 100 (percent)")
		}
		pr.Percent = *percent
	}
	if message != nil {
		if !jobs.CleanText(*message) {
			return nil, invalid(field("progress_message"), "must be text without control characters")
		}
		pr.Message = jobs.TruncateBytes(*message, jobs.MaxProgressMessage, "…")
	}
	return pr, nil
}

// leaseOf reads a job id and lease token given as text; field names
// them in errors.
func leaseOf(jobID, token *string, field func(string) string) (domain.Lease, error) {
	var l domain.Lease
	if jobID == nil {
		return l, invalid(field("job_id"), "is required: the id of a job this worker holds")
	}
	id, err := uuid.Parse(*jobID)
	if err != nil {
		return l, invalid(field("job_id"), "must be a job id (a UUID)")
	}
	if token == nil {
		return l, invalid(field("lease_token"), "is required: the lease_token the claim returned")
	}
	tok, err := uuid.Parse(*token)
	if err != nil {
		return l, invalid(field("lease_token"), "must be the lease_token the claim returned (a UUID)")
	}
	return domain.Lease{JobID: id, Token: tok}, nil
}
