// Package tracing connects Flint to OpenTelemetry: it sets up the
// OpenTelemetry Go SDK with its OTLP/HTTP exporter from the standard
// OTEL_* environment variables, and carries W3C trace context (the
// traceparent) from the request that enqueues a job to every attempt
// that runs it, wherever it runs.
//
// Tracing is off unless an OTLP endpoint is configured. While it is off,
// Enabled is false and nothing else here does any work: the callers test
// Enabled before they read a context or start a span, so the job paths
// pay one atomic load.
package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope Flint's spans are reported under.
const ScopeName = "github.com/flinthq/flint"

// MaxTraceparentLen bounds a traceparent Flint keeps: version 00 is 55
// characters; later versions may append fields, which are dropped.
const MaxTraceparentLen = 55

var (
	enabled atomic.Bool
	tracer  atomic.Pointer[trace.Tracer]
	w3c     = propagation.TraceContext{}
)

func init() {
	t := noop.NewTracerProvider().Tracer(ScopeName)
	tracer.Store(&t)
}

// RunSpanName is the name of the span of one attempt of a job of type typ.
func RunSpanName(typ string) string { return "flint run " + typ }

// Enabled reports whether this process records spans.
func Enabled() bool { return enabled.Load() }

// Tracer is Flint's tracer (a no-op one while tracing is off).
func Tracer() trace.Tracer { return *tracer.Load() }

// Use makes tp the provider Flint's spans come from and turns tracing on
// (or off, for nil), for a program that sets up the OpenTelemetry SDK
// itself instead of through the OTEL_* variables (and for tests). Give
// an SDK provider IDGenerator (sdktrace.WithIDGenerator), or the spans of
// pull workers' attempts get ids of their own instead of the ones the
// workers were handed.
func Use(tp trace.TracerProvider) { use(tp) }

func use(tp trace.TracerProvider) {
	if tp == nil {
		tp = noop.NewTracerProvider()
		enabled.Store(false)
	} else {
		enabled.Store(true)
	}
	t := tp.Tracer(ScopeName)
	tracer.Store(&t)
}

// Parse reads a W3C traceparent. A malformed one (or one naming the
// invalid all-zero trace or span) is reported as not ok and is to be
// ignored: a bad header never fails a request.
func Parse(traceparent string) (trace.SpanContext, bool) {
	if sc, ok := parse00(traceparent); ok {
		return sc, true
	}
	if traceparent == "" || len(traceparent) > 512 {
		return trace.SpanContext{}, false
	}
	c := headerCarrier(traceparent)
	ctx := w3c.Extract(context.Background(), &c)
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// parse00 reads a version-00 traceparent in lower-case hex, the form
// Flint stores, without the propagator's allocations: every attempt's
// span parses one. Anything else is left to the propagator.
func parse00(tp string) (trace.SpanContext, bool) {
	if len(tp) != 55 || tp[0] != '0' || tp[1] != '0' || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var t trace.TraceID
	var sp trace.SpanID
	var f [1]byte
	if !unhex(t[:], tp[3:35]) || !unhex(sp[:], tp[36:52]) || !unhex(f[:], tp[53:55]) {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: t, SpanID: sp, TraceFlags: trace.TraceFlags(f[0]) & trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// unhex decodes lower-case hex s into dst (len(s) == 2*len(dst)).
func unhex(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := nibble(s[2*i])
		lo, ok2 := nibble(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func nibble(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Format writes sc as a version-00 traceparent, or "" when it is not
// valid.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + (sc.TraceFlags() & trace.FlagsSampled).String()
}

// FromContext is the traceparent of the span ctx carries, or "" when it
// carries none or tracing is off.
func FromContext(ctx context.Context) string {
	if !Enabled() {
		return ""
	}
	return Format(trace.SpanContextFromContext(ctx))
}

// Clean is traceparent as Flint stores it: normalized to version 00, or
// "" when it is malformed.
func Clean(traceparent string) string {
	sc, ok := Parse(traceparent)
	if !ok {
		return ""
	}
	return Format(sc)
}

// WithRemote returns ctx carrying traceparent as its remote parent, or ctx
// unchanged when traceparent is malformed or empty.
func WithRemote(ctx context.Context, traceparent string) context.Context {
	sc, ok := Parse(traceparent)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Child is a traceparent for a new span under traceparent (same trace, a
// new span id, the same flags), or "" when traceparent is malformed. A
// pull worker is handed one per attempt to parent what it does.
func Child(traceparent string) string {
	sc, ok := Parse(traceparent)
	if !ok {
		return ""
	}
	return Format(sc.WithSpanID(newSpanID()).WithRemote(false))
}

// headerCarrier carries one traceparent value through the propagator.
type headerCarrier string

func (c *headerCarrier) Get(key string) string {
	if key == "traceparent" {
		return string(*c)
	}
	return ""
}

func (c *headerCarrier) Set(key, value string) {
	if key == "traceparent" {
		*c = headerCarrier(value)
	}
}

func (c *headerCarrier) Keys() []string { return []string{"traceparent"} }
