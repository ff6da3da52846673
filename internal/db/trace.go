package db

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// traceEnqueue starts the enqueue span under ctx (the request's
// traceparent, or the caller's own span) and returns params with that
// span's context as the traceparent of every job that brings none of its
// own, and a function that ends the span with the enqueue's outcome. The
// caller's slice is not changed. Call it only while tracing is on.
func traceEnqueue(ctx context.Context, via string, params []jobs.EnqueueParams) (context.Context, []jobs.EnqueueParams, func([]jobs.Enqueued, error)) {
	ctx, span := tracing.Tracer().Start(ctx, "flint enqueue", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "flint"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("flint.enqueue.via", via), attribute.Int("messaging.batch.message_count", len(params))))
	tp := tracing.Format(span.SpanContext())
	stamped := make([]jobs.EnqueueParams, len(params))
	for i, p := range params {
		if p.Traceparent == "" {
			p.Traceparent = tp
		} else {
			p.Traceparent = tracing.Clean(p.Traceparent)
		}
		stamped[i] = p
	}
	if len(params) == 1 {
		span.SetAttributes(attribute.String("flint.job.type", params[0].Type),
			attribute.String("flint.job.queue", queueName(params[0].Queue)))
	}
	return ctx, stamped, func(out []jobs.Enqueued, err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else if len(out) == 1 {
			span.SetAttributes(attribute.String("flint.job.id", out[0].Job.ID.String()),
				attribute.Bool("flint.job.inserted", out[0].Inserted))
		}
		span.End()
	}
}

// traceBatch is traceEnqueue for a new batch: its callbacks, which are
// enqueued when the batch settles, are stamped with the enqueue span's
// context as its members are, so that they continue the trace that
// started the batch. The caller's p is not changed. Call it only while
// tracing is on.
func traceBatch(ctx context.Context, p domain.BatchParams) (context.Context, domain.BatchParams, func([]jobs.Enqueued, error)) {
	ctx, members, end := traceEnqueue(ctx, "batch", p.Jobs)
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("flint.batch.id", p.ID.String()))
	tp := tracing.FromContext(ctx)
	cbs := make(map[string]jobs.EnqueueParams, len(p.Callbacks))
	for kind, cb := range p.Callbacks {
		if cb.Traceparent == "" {
			cb.Traceparent = tp
		} else {
			cb.Traceparent = tracing.Clean(cb.Traceparent)
		}
		cbs[kind] = cb
	}
	p.Jobs, p.Callbacks = members, cbs
	return ctx, p, end
}

func queueName(q string) string {
	if q == "" {
		return jobs.DefaultQueue
	}
	return q
}

// traceGroupCommit starts the span of one group commit, linked to the
// enqueue span of every job it writes (a commit serves many traces, so
// it belongs to none of them). Call it only while tracing is on.
func traceGroupCommit(ctx context.Context, params []jobs.EnqueueParams) (context.Context, func(error)) {
	links := make([]trace.Link, 0, len(params))
	for _, p := range params {
		if sc, ok := tracing.Parse(p.Traceparent); ok {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := tracing.Tracer().Start(ctx, "flint group_commit", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.Int("messaging.batch.message_count", len(params))))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
