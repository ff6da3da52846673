package tracing

import (
	"context"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// idGenerator makes random trace and span ids, except for a span started
// under WithSpanID: a span recorded after the fact for work another
// process did (a pull worker's attempt) takes the id that process was
// handed, so the spans it made itself stay its children.
type idGenerator struct{}

// IDGenerator is the id generator Flint's spans need (see Use).
func IDGenerator() sdktrace.IDGenerator { return idGenerator{} }

type spanIDKey struct{}

// withSpanID makes the next span started under ctx take sc's ids.
func withSpanID(ctx context.Context, sc trace.SpanContext) context.Context {
	return context.WithValue(ctx, spanIDKey{}, sc)
}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(spanIDKey{}).(trace.SpanContext); ok && sc.IsValid() {
		return sc.TraceID(), sc.SpanID()
	}
	var t trace.TraceID
	for !t.IsValid() {
		hi, lo := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			t[i], t[8+i] = byte(hi>>(56-8*i)), byte(lo>>(56-8*i))
		}
	}
	return t, newSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if sc, ok := ctx.Value(spanIDKey{}).(trace.SpanContext); ok && sc.IsValid() && sc.TraceID() == traceID {
		return sc.SpanID()
	}
	return newSpanID()
}

func newSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		v := rand.Uint64()
		for i := range 8 {
			s[i] = byte(v >> (56 - 8*i))
		}
	}
	return s
}

// Attempt is a run of a job that another process did (a pull worker)
// and reported when it finished, to be recorded as a span.
type Attempt struct {
	// Name is the span's name.
	Name string
	// Parent is the traceparent the job was enqueued under ("" for none:
	// the span starts a trace of its own).
	Parent string
	// Reported is the traceparent the worker ran the attempt as (handed
	// to it with the claim); its span id becomes the span's. "" or a
	// malformed one, or one of another trace, gets a new span id.
	Reported string
	// Start and End bound the run.
	Start, End time.Time
	// Attributes describe it; Error, when set, is its failure.
	Attributes []attribute.KeyValue
	Error      string
	OK         bool
}

// RecordAttempt records a as a span, when tracing is on.
func RecordAttempt(ctx context.Context, a Attempt) {
	if !Enabled() {
		return
	}
	ctx = WithRemote(context.WithoutCancel(ctx), a.Parent)
	parent := trace.SpanContextFromContext(ctx)
	if sc, ok := Parse(a.Reported); ok && (!parent.IsValid() || sc.TraceID() == parent.TraceID()) {
		ctx = withSpanID(ctx, sc)
	}
	_, span := Tracer().Start(ctx, a.Name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(a.Start), trace.WithAttributes(a.Attributes...))
	switch {
	case a.Error != "":
		span.SetStatus(codes.Error, a.Error)
	case a.OK:
		span.SetStatus(codes.Ok, "")
	}
	span.End(trace.WithTimestamp(a.End))
}

// AttemptTraceparent is the traceparent a pull worker is handed for one
// attempt of a job enqueued under parent: a new span of parent's trace,
// or, for a job enqueued without one, of a new trace. "" while tracing is
// off.
func AttemptTraceparent(parent string) string {
	if !Enabled() {
		return ""
	}
	if tp := Child(parent); tp != "" {
		return tp
	}
	t, s := idGenerator{}.NewIDs(context.Background())
	return Format(trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled}))
}
