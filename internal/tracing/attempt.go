package tracing

import (
	"context"
	"crypto/sha256"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attempts that run outside this process (a pull worker's, a push
// endpoint's) are recorded by the Flint process that hears of them, and
// what they did meanwhile (the steps they recorded) by whichever process
// served those requests. Each of those processes must name the same
// attempt's span without asking another: its ids derive from the
// attempt's lease token, which every request about the attempt carries.

// attemptIDs are the trace id (for a job enqueued without trace context)
// and the span id of the attempt holding lease: a hash of the token, so
// that the ids, which are exported, tell nothing about it.
func attemptIDs(lease [16]byte) (trace.TraceID, trace.SpanID) {
	h := sha256.Sum256(append([]byte("flint attempt span "), lease[:]...))
	var t trace.TraceID
	var s trace.SpanID
	copy(t[:], h[:16])
	copy(s[:], h[16:24])
	if !t.IsValid() || !s.IsValid() { // one chance in 2^64
		t[0], s[0] = 1, 1
	}
	return t, s
}

// AttemptSpan is the span context of the attempt holding lease of a job
// enqueued under parent: a span of parent's trace with parent's flags,
// or, for a job enqueued without trace context (or with a malformed
// one), of a trace of its own, sampled. The same inputs always give the
// same span.
func AttemptSpan(parent string, lease [16]byte) trace.SpanContext {
	t, s := attemptIDs(lease)
	cfg := trace.SpanContextConfig{TraceID: t, SpanID: s, TraceFlags: trace.FlagsSampled}
	if p, ok := Parse(parent); ok {
		cfg.TraceID, cfg.TraceFlags = p.TraceID(), p.TraceFlags()
	}
	return trace.NewSpanContext(cfg)
}

// AttemptTraceparent is the traceparent a pull worker (or a push
// endpoint) is handed for the attempt holding lease of a job enqueued
// under parent (AttemptSpan). "" while tracing is off.
func AttemptTraceparent(parent string, lease [16]byte) string {
	if !Enabled() {
		return ""
	}
	return Format(AttemptSpan(parent, lease))
}

// WithAttemptSpan makes the next span started under ctx take the ids of
// AttemptSpan(parent, lease): the span of an attempt this process runs
// for another (a push delivery), whose steps other processes record.
func WithAttemptSpan(ctx context.Context, parent string, lease [16]byte) context.Context {
	return withSpanID(ctx, AttemptSpan(parent, lease))
}

// Attempt is a run of a job that another process did (a pull worker)
// and reported when it finished, to be recorded as a span.
type Attempt struct {
	// Name is the span's name.
	Name string
	// Parent is the traceparent the job was enqueued under ("" for none:
	// the span starts a trace of its own).
	Parent string
	// Lease is the attempt's lease token: the span takes the ids of
	// AttemptSpan(Parent, Lease), which the worker was handed.
	Lease [16]byte
	// Reported is the traceparent the worker says it ran the attempt as
	// (handed to it with the claim); a valid one of the job's trace names
	// the span instead of Lease. "" or a malformed one is ignored.
	Reported string
	// Start and End bound the run.
	Start, End time.Time
	// Attributes describe it; Error, when set, is its failure.
	Attributes []attribute.KeyValue
	Error      string
	OK         bool
	// Replayed names the steps the run returned from earlier runs'
	// records without running them: each is an event on the span.
	Replayed []string
}

// RecordAttempt records a as a span, when tracing is on.
func RecordAttempt(ctx context.Context, a Attempt) {
	if !Enabled() {
		return
	}
	ctx = WithRemote(context.WithoutCancel(ctx), a.Parent)
	parent := trace.SpanContextFromContext(ctx)
	sc := AttemptSpan(a.Parent, a.Lease)
	if r, ok := Parse(a.Reported); ok && (!parent.IsValid() || r.TraceID() == parent.TraceID()) {
		sc = r
	}
	ctx = withSpanID(ctx, sc)
	_, span := Tracer().Start(ctx, a.Name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(a.Start), trace.WithAttributes(a.Attributes...))
	for _, name := range a.Replayed {
		span.AddEvent(StepReplayedEvent, trace.WithTimestamp(a.Start), trace.WithAttributes(attribute.String("flint.step.name", name)))
	}
	switch {
	case a.Error != "":
		span.SetStatus(codes.Error, a.Error)
	case a.OK:
		span.SetStatus(codes.Ok, "")
	}
	span.End(trace.WithTimestamp(a.End))
}

// StepReplayedEvent is the event on an attempt's span for a step the run
// returned from an earlier run's record without running it.
const StepReplayedEvent = "flint step replayed"

// StepSpanName is the name of the span of durable step name.
func StepSpanName(name string) string { return "flint step " + name }

// Step is a durable step that another process ran (a pull worker, a push
// endpoint) and recorded through the API, to be recorded as a span.
type Step struct {
	// Name, Seq (its number in the job) and Recorded (false when a step
	// of the same name was recorded before: its result stands, this
	// run's was dropped) describe it.
	Name     string
	Seq      int
	Recorded bool
	// JobID and Attempt name the attempt that ran it; Parent is the
	// traceparent the job was enqueued under and Lease the attempt's
	// lease token: the span is a child of AttemptSpan(Parent, Lease).
	JobID   string
	Attempt int
	Parent  string
	Lease   [16]byte
	// Start and End bound the step's run.
	Start, End time.Time
}

// RecordStep records s as a span under its attempt's span, when tracing
// is on.
func RecordStep(ctx context.Context, s Step) {
	if !Enabled() {
		return
	}
	ctx = trace.ContextWithRemoteSpanContext(context.WithoutCancel(ctx), AttemptSpan(s.Parent, s.Lease))
	_, span := Tracer().Start(ctx, StepSpanName(s.Name), trace.WithTimestamp(s.Start),
		trace.WithAttributes(attribute.String("flint.step.name", s.Name), attribute.Int("flint.step.seq", s.Seq),
			attribute.String("flint.job.id", s.JobID), attribute.Int("flint.job.attempt", s.Attempt),
			attribute.Bool("flint.step.replayed", false), attribute.Bool("flint.step.recorded", s.Recorded),
			attribute.Bool("flint.worker.remote", true)))
	span.SetStatus(codes.Ok, "")
	span.End(trace.WithTimestamp(s.End))
}
