package handlers

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// traceContext continues the caller's trace: with tracing on, a request's
// W3C traceparent header becomes the remote parent of what the request
// does (the enqueue span, and through it every attempt of the jobs it
// enqueues). A malformed traceparent is ignored, never refused: tracing
// must not fail a request. With tracing off it does nothing.
func traceContext(c *fiber.Ctx) error {
	if !tracing.Enabled() {
		return c.Next()
	}
	if tp := c.Get("traceparent"); tp != "" {
		c.SetUserContext(tracing.WithRemote(c.UserContext(), tp))
	}
	return c.Next()
}

// traceFinished records the span of each attempt a pull worker finished
// (with tracing on): under the job's enqueue span, with the id the
// worker ran it as (the claim's traceparent, reported back with the
// outcome, or derived again from the lease when it reports none), from
// when its run started to now, with the steps it replayed as events. An
// attempt whose lease was lost is left out: it was not this worker's to
// report.
func traceFinished(ctx context.Context, workerID string, reqs []outcomeRequest, batch []domain.Finish,
	finished []domain.Moved, claimed map[uuid.UUID]domain.Claimed, now time.Time) {
	if !tracing.Enabled() {
		return
	}
	for i := range batch {
		if i >= len(finished) || finished[i].LeaseLost() {
			continue
		}
		cl, ok := claimed[batch[i].JobID]
		if !ok {
			continue
		}
		f := &batch[i]
		start := now
		if cl.StartedAt != nil && cl.StartedAt.Before(now) {
			start = *cl.StartedAt
		}
		a := tracing.Attempt{Name: tracing.RunSpanName(cl.Type), Parent: cl.Traceparent, Lease: f.Lease.Token, Reported: reqs[i].Traceparent,
			Start: start, End: now, OK: f.Outcome == domain.OutcomeSucceeded,
			Attributes: []attribute.KeyValue{
				attribute.String("messaging.system", "flint"),
				attribute.String("flint.job.id", f.JobID.String()),
				attribute.String("flint.job.type", cl.Type),
				attribute.String("flint.job.queue", cl.Queue),
				attribute.Int("flint.job.attempt", cl.Attempt),
				attribute.String("flint.job.outcome", string(f.Outcome)),
				attribute.String("flint.worker.id", workerID),
				attribute.Bool("flint.worker.remote", true),
			}}
		if f.Outcome == domain.OutcomeFailed {
			a.Error = f.Error
		}
		a.Replayed = replayedSteps(reqs[i].ReplayedSteps)
		tracing.RecordAttempt(ctx, a)
	}
}

// maxReplayedEvents bounds the replayed steps an attempt's span records.
const maxReplayedEvents = 1000

// replayedSteps is names without what is not a step's name, at most
// maxReplayedEvents of them: trace data is never refused.
func replayedSteps(names []string) []string {
	out := make([]string, 0, min(len(names), maxReplayedEvents))
	for _, n := range names {
		if len(out) < maxReplayedEvents && jobs.CheckStepName("", n) == nil {
			out = append(out, n)
		}
	}
	return out
}

// traceSpawned puts the jobs an attempt's outcome spawns (a pull
// worker's finish, or a push endpoint's after a 202) under the attempt's
// span, with tracing on, so a workflow that grows as it runs stays one
// trace: the span the worker reported (a valid traceparent of the job's
// trace), or else the one it was handed (tracing.AttemptSpan of the
// job's traceparent, parent, and the attempt's lease).
func traceSpawned(spawned []jobs.Spawned, reported, parent string, lease domain.Lease) {
	if !tracing.Enabled() || len(spawned) == 0 {
		return
	}
	tp := tracing.AttemptTraceparent(parent, lease.Token)
	if r, ok := tracing.Parse(reported); ok && tp[3:35] == r.TraceID().String() {
		tp = tracing.Format(r)
	}
	for k := range spawned {
		spawned[k].Params.Traceparent = tp
	}
}

// stepStart is when a step a worker recorded started: the time it gave
// (started, its clock), kept within the attempt's run (from the run's
// start, runStart when known, to now, this process's clock) so that a
// skewed clock cannot put a step outside its attempt.
func stepStart(started time.Time, runStart *time.Time, now time.Time) time.Time {
	if runStart != nil && started.Before(*runStart) {
		started = *runStart
	}
	if started.After(now) {
		started = now
	}
	return started
}

// traceStep records the span of a step a pull worker or a push endpoint
// ran and recorded (with tracing on): a child of the attempt's span (the
// one the worker was handed), from when the step started to when it was
// recorded. fresh is false when an earlier record of the step stands.
func traceStep(ctx context.Context, h domain.LeaseHolder, rec jobs.StepRecord, fresh bool, started, now time.Time) {
	if !tracing.Enabled() {
		return
	}
	tracing.RecordStep(ctx, tracing.Step{Name: rec.Name, Seq: rec.Seq, Recorded: fresh, JobID: h.JobID.String(),
		Attempt: h.Attempt, Parent: h.Traceparent, Lease: h.Token, Start: started, End: now})
}
