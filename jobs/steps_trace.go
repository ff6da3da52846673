package jobs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/tracing"
)

// traceStep starts the span of a durable step that runs now (a child of
// the attempt's span), when tracing is on, and returns the context its
// function runs in and what ends the span. A step replayed from what an
// earlier attempt recorded runs nothing: it is an event on the attempt's
// span instead.
func traceStep(ctx context.Context, j *Job, name string, seq int, replayed bool) (context.Context, func(error)) {
	if !tracing.Enabled() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{attribute.String("flint.step.name", name), attribute.Int("flint.step.seq", seq),
		attribute.String("flint.job.id", j.ID.String()), attribute.Int("flint.job.attempt", j.Attempt)}
	if replayed {
		trace.SpanFromContext(ctx).AddEvent("flint step replayed", trace.WithAttributes(attrs...))
		return ctx, nil
	}
	ctx, span := tracing.Tracer().Start(ctx, "flint step "+name, trace.WithAttributes(attrs...))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetStatus(codes.Ok, "")
		}
		span.End()
	}
}
