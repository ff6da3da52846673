package workers

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// startRunSpan starts the span of one attempt of j, a child of the span
// that enqueued it (j.Traceparent), so that every attempt, retries
// included, joins the trace that started the job. Call it only while
// tracing is on.
func startRunSpan(ctx context.Context, j *jobs.Job, workerID string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx = tracing.WithRemote(ctx, j.Traceparent)
	opts = append(opts, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(runAttributes(j, workerID)...))
	return tracing.Tracer().Start(ctx, tracing.RunSpanName(j.Type), opts...)
}

// runAttributes are the attributes of an attempt's span.
func runAttributes(j *jobs.Job, workerID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "flint"),
		attribute.String("flint.job.id", j.ID.String()),
		attribute.String("flint.job.type", j.Type),
		attribute.String("flint.job.queue", j.Queue),
		attribute.Int("flint.job.attempt", j.Attempt),
		attribute.String("flint.worker.id", workerID),
	}
}

// endRunSpan ends an attempt's span with its outcome: a failure's error
// is the span's status.
func endRunSpan(span trace.Span, f *domain.Finish, opts ...trace.SpanEndOption) {
	span.SetAttributes(attribute.String("flint.job.outcome", string(f.Outcome)))
	switch f.Outcome {
	case domain.OutcomeSucceeded:
		span.SetStatus(codes.Ok, "")
	case domain.OutcomeFailed:
		span.SetStatus(codes.Error, f.Error)
		if f.Final {
			span.SetAttributes(attribute.Bool("flint.job.final", true))
		}
	case domain.OutcomeSuspended:
	default:
		if f.Error != "" {
			span.SetAttributes(attribute.String("flint.job.reason", f.Error))
		}
	}
	span.End(opts...)
}

// endLostSpan ends an attempt's span whose lease was lost: its outcome is
// discarded, another worker may run the job.
func endLostSpan(span trace.Span) {
	span.SetAttributes(attribute.String("flint.job.outcome", "lease_lost"))
	span.SetStatus(codes.Error, "lease lost while running")
	span.End()
}

// tracedDeliver is deliver within the attempt's span, with tracing on:
// the request carries the span's traceparent header, and the jobs the
// answer spawns continue it. An endpoint that answers 202 finishes the
// job later; its span ends with the request.
func (p *Pusher) tracedDeliver(ctx context.Context, q domain.PushQueue, d *delivery) pushOutcome {
	if !tracing.Enabled() {
		return p.deliver(ctx, q, d)
	}
	// The span takes the ids an endpoint's steps, recorded through the
	// API by any Flint process, are put under (tracing.AttemptSpan); the
	// delivery goes on in a context without that request, so that no
	// other span takes them.
	_, span := startRunSpan(tracing.WithAttemptSpan(ctx, d.job.Traceparent, d.lease.Token), d.job, p.cfg.WorkerID,
		trace.WithAttributes(attribute.String("flint.push.url", domain.RedactURL(q.URL))))
	ctx = trace.ContextWithSpan(ctx, span)
	out := p.deliver(ctx, q, d)
	if out.record.StatusCode != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", out.record.StatusCode))
	}
	if out.finish == nil {
		span.SetAttributes(attribute.String("flint.job.outcome", "accepted"))
		span.End()
		return out
	}
	if tp := tracing.Format(span.SpanContext()); tp != "" {
		for k := range out.finish.Spawn { // spawned by the answer: under the attempt, as jobs.Spawn does
			out.finish.Spawn[k].Params.Traceparent = tp
		}
	}
	endRunSpan(span, out.finish)
	return out
}
