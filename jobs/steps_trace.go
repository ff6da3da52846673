package jobs

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// traceScope is the instrumentation scope of Flint's spans (the tracing
// package's ScopeName).
const traceScope = "github.com/flinthq/flint"

// traceStep starts the span of a durable step that runs now, a child of
// the attempt's span, when that span is recorded (tracing is on), and
// returns the context its function runs in and what ends the span. A
// step replayed from what an earlier attempt recorded runs nothing: it
// is an event on the attempt's span instead.
func traceStep(ctx context.Context, j *Job, name string, seq int, replayed bool) (context.Context, func(error)) {
	run := trace.SpanFromContext(ctx)
	if !run.IsRecording() {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{attribute.String("flint.step.name", name), attribute.Int("flint.step.seq", seq),
		attribute.String("flint.job.id", j.ID.String()), attribute.Int("flint.job.attempt", j.Attempt)}
	attrs = append(attrs, attribute.Bool("flint.step.replayed", replayed))
	if replayed {
		run.AddEvent("flint step replayed", trace.WithAttributes(attrs...))
		return ctx, nil
	}
	ctx, span := run.TracerProvider().Tracer(traceScope).Start(ctx, "flint step "+name, trace.WithAttributes(attrs...))
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

// traceparentOf is the W3C traceparent of the span ctx carries, or ""
// when it carries none.
func traceparentOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// cleanTraceparent is tp when it is a well-formed version-00 W3C
// traceparent (lower-case hex, neither id all zeros), else "": trace
// context that cannot be read is dropped, never refused.
func cleanTraceparent(tp string) string {
	if len(tp) != 55 || tp[:3] != "00-" || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	zeroTrace, zeroSpan := true, true
	for i := 3; i < 55; i++ {
		c := tp[i]
		switch {
		case i == 35 || i == 52:
			continue
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		default:
			return ""
		}
		if c != '0' && i < 35 {
			zeroTrace = false
		}
		if c != '0' && i > 35 && i < 52 {
			zeroSpan = false
		}
	}
	if zeroTrace || zeroSpan {
		return ""
	}
	return tp
}
