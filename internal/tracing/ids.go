package tracing

import (
	"context"
	"math/rand/v2"

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
