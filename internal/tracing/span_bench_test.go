package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/flinthq/flint/internal/tracing"
)

// BenchmarkAttemptSpan is what one attempt's span costs the process that
// runs it: parsing the stored traceparent, starting the span with the
// job's attributes, ending it with the outcome, and (with the OTLP
// exporter) exporting it in the background. Wall time per op means little
// on a busy machine; run it with -cpuprofile and divide the CPU samples by
// the ops (about 9 µs a span on the development machine, 2026-12-06,
// half of it in the SDK's exporter and the garbage collector).
func BenchmarkAttemptSpan(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  sdktrace.TracerProviderOption
	}{{"otlp", sdktrace.WithBatcher(exp)}} {
		b.Run(c.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(c.opt, sdktrace.WithIDGenerator(tracing.IDGenerator()))
			tracing.Use(tp)
			defer tracing.Use(nil)
			b.ReportAllocs()
			for b.Loop() {
				ctx := tracing.WithRemote(context.Background(), valid)
				_, span := tracing.Tracer().Start(ctx, "flint run noop", trace.WithSpanKind(trace.SpanKindConsumer),
					trace.WithAttributes(attribute.String("messaging.system", "flint"), attribute.String("flint.job.id", "0193e4b2-8f1c-7b7e-9a3d-2c4f5e6a7b8c"),
						attribute.String("flint.job.type", "noop"), attribute.String("flint.job.queue", "default"),
						attribute.Int("flint.job.attempt", 1), attribute.String("flint.worker.id", "host-123-abc")))
				span.SetAttributes(attribute.String("flint.job.outcome", "succeeded"))
				span.End()
			}
			_ = tp.Shutdown(context.Background())
		})
	}
}
