package tracing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/internal/tracing"
)

const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestMalformedTraceparentIsDropped: what is not a W3C traceparent is
// reported as such (and cleaned to ""), never an error.
func TestMalformedTraceparentIsDropped(t *testing.T) {
	for _, bad := range []string{"", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01",
		strings.Repeat("0", 10000)} {
		_, ok := tracing.Parse(bad)
		require.False(t, ok, "%.40q", bad)
		require.Empty(t, tracing.Clean(bad))
		require.Empty(t, tracing.Child(bad))
		ctx := tracing.WithRemote(context.Background(), bad)
		require.False(t, trace.SpanContextFromContext(ctx).IsValid())
	}
	require.Equal(t, valid, tracing.Clean(valid))
	require.Equal(t, valid, tracing.Clean(strings.ToUpper(valid[:3])+valid[3:]), "version 00 either case")
	child := tracing.Child(valid)
	require.Equal(t, valid[:36], child[:36], "same trace")
	require.NotEqual(t, valid[36:52], child[36:52], "a span of its own")
	require.Equal(t, "-01", child[52:])
}

// TestConfigFromEnv: off by default; on with an OTLP endpoint; off again
// when the SDK is disabled or the exporter is none; a protocol or
// exporter Flint does not ship is refused at start.
func TestConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	c, err := tracing.ConfigFromEnv(env())
	require.NoError(t, err)
	require.False(t, c.Enabled)
	require.Equal(t, "flint", c.ServiceName)
	c, err = tracing.ConfigFromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318", "OTEL_SERVICE_NAME", "billing"))
	require.NoError(t, err)
	require.True(t, c.Enabled)
	require.Equal(t, "billing", c.ServiceName)
	c, err = tracing.ConfigFromEnv(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4318/v1/traces"))
	require.NoError(t, err)
	require.True(t, c.Enabled)
	c, err = tracing.ConfigFromEnv(env("OTEL_TRACES_EXPORTER", "otlp"))
	require.NoError(t, err)
	require.True(t, c.Enabled, "otlp alone means the default endpoint")
	for _, off := range [][]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		c, err = tracing.ConfigFromEnv(env(append(off, "OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")...))
		require.NoError(t, err)
		require.False(t, c.Enabled, "%v", off)
	}
	_, err = tracing.ConfigFromEnv(env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"))
	require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL")
	_, err = tracing.ConfigFromEnv(env("OTEL_TRACES_EXPORTER", "zipkin"))
	require.ErrorContains(t, err, "OTEL_TRACES_EXPORTER")
}

// TestRecordAttemptTakesTheReportedSpanID: a pull worker's attempt is
// recorded with the span id it was handed, under the enqueue span, from
// its start to its end; a reported traceparent of another trace is not
// trusted with the id.
func TestRecordAttemptTakesTheReportedSpanID(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDGenerator()))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	require.True(t, tracing.Enabled())
	lease := [16]byte{1, 2, 3}
	handed := tracing.AttemptTraceparent(valid, lease)
	start := time.Now().Add(-time.Second)
	tracing.RecordAttempt(context.Background(), tracing.Attempt{Name: "flint run x", Parent: valid, Reported: handed,
		Start: start, End: start.Add(500 * time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("flint.job.id", "j1")},
		Error: "boom"})
	other := "00-5bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
	tracing.RecordAttempt(context.Background(), tracing.Attempt{Name: "flint run y", Parent: valid, Reported: other,
		Start: start, End: start, OK: true})
	spans := rec.Ended()
	require.Len(t, spans, 2)
	sc, _ := tracing.Parse(handed)
	require.Equal(t, sc.SpanID(), spans[0].SpanContext().SpanID())
	require.Equal(t, sc.TraceID(), spans[0].SpanContext().TraceID())
	require.Equal(t, valid[36:52], spans[0].Parent().SpanID().String())
	require.Equal(t, start.UnixNano(), spans[0].StartTime().UnixNano())
	require.Equal(t, "boom", spans[0].Status().Description)
	require.Equal(t, valid[3:35], spans[1].SpanContext().TraceID().String(), "stays in the enqueue's trace")
	require.NotEqual(t, "1111111111111111", spans[1].SpanContext().SpanID().String())
	tracing.Use(nil)
	require.False(t, tracing.Enabled())
	require.Empty(t, tracing.AttemptTraceparent(valid, lease), "nothing is handed out while tracing is off")
}

// TestAttemptSpanComesFromTheLease: every process names an attempt's span
// the same from its lease token, so a pull worker's attempt recorded
// without a reported traceparent still takes the id the worker was
// handed, and a step recorded by another process is its child; a job
// enqueued without trace context gets a trace of its own.
func TestAttemptSpanComesFromTheLease(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDGenerator()))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	lease, other := [16]byte{9, 9, 9}, [16]byte{9, 9, 8}
	sc := tracing.AttemptSpan(valid, lease)
	require.Equal(t, sc, tracing.AttemptSpan(valid, lease), "the same every time")
	require.NotEqual(t, sc.SpanID(), tracing.AttemptSpan(valid, other).SpanID(), "another attempt, another span")
	require.Equal(t, valid[3:35], sc.TraceID().String(), "in the enqueue's trace")
	require.NotContains(t, sc.SpanID().String(), "090909", "the token is hashed, not shown")
	own := tracing.AttemptSpan("", lease)
	require.True(t, own.IsValid())
	require.NotEqual(t, valid[3:35], own.TraceID().String())
	require.True(t, own.IsSampled())

	start := time.Now().Add(-time.Second)
	tracing.RecordAttempt(context.Background(), tracing.Attempt{Name: "flint run x", Parent: valid, Lease: lease,
		Start: start, End: start.Add(time.Second), OK: true, Replayed: []string{"charge"}})
	tracing.RecordStep(context.Background(), tracing.Step{Name: "invoice", Seq: 2, Recorded: true, JobID: "j1", Attempt: 1,
		Parent: valid, Lease: lease, Start: start.Add(100 * time.Millisecond), End: start.Add(200 * time.Millisecond)})
	tracing.RecordAttempt(context.Background(), tracing.Attempt{Name: "flint run y", Lease: other, Start: start, End: start})
	spans := rec.Ended()
	require.Len(t, spans, 3)
	run, step, root := spans[0], spans[1], spans[2]
	require.Equal(t, sc.SpanID(), run.SpanContext().SpanID(), "no traceparent reported: the handed id")
	require.Len(t, run.Events(), 1)
	require.Equal(t, tracing.StepReplayedEvent, run.Events()[0].Name)
	require.Equal(t, "flint step invoice", step.Name())
	require.Equal(t, sc.SpanID(), step.Parent().SpanID(), "the step is the attempt's child")
	require.Equal(t, sc.TraceID(), step.SpanContext().TraceID())
	require.Equal(t, start.Add(100*time.Millisecond).UnixNano(), step.StartTime().UnixNano())
	require.Contains(t, step.Attributes(), attribute.Bool("flint.step.recorded", true))
	require.Equal(t, tracing.AttemptSpan("", other).TraceID(), root.SpanContext().TraceID(), "a trace of its own, named by the lease")
	require.Equal(t, tracing.AttemptSpan("", other).SpanID(), root.SpanContext().SpanID())
}
