package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// Config says whether and where spans go. Read it from the environment
// with ConfigFromEnv; the exporter, sampler, batching and resource read
// the rest of the standard OTEL_* variables themselves.
type Config struct {
	// Enabled is true when an OTLP endpoint is configured
	// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
	// or OTEL_TRACES_EXPORTER=otlp, and neither OTEL_SDK_DISABLED=true
	// nor OTEL_TRACES_EXPORTER=none says otherwise.
	Enabled bool
	// ServiceName is OTEL_SERVICE_NAME, or "flint".
	ServiceName string
}

// ConfigFromEnv reads Config from the environment (getenv, normally
// os.Getenv). It refuses an exporter or protocol Flint does not ship:
// OTLP over HTTP with protobuf is the one it does.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{ServiceName: getenv("OTEL_SERVICE_NAME")}
	if c.ServiceName == "" {
		c.ServiceName = "flint"
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return c, nil
	}
	exporter := strings.TrimSpace(strings.ToLower(getenv("OTEL_TRACES_EXPORTER")))
	switch exporter {
	case "none":
		return c, nil
	case "", "otlp":
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Flint exports traces with OTLP only (otlp or none)", exporter)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(name); v != "" && v != "http/protobuf" {
			return c, fmt.Errorf("%s=%q: Flint sends OTLP over HTTP (http/protobuf); point it at the receiver's HTTP port (4318)", name, v)
		}
	}
	c.Enabled = exporter == "otlp" || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
		getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	return c, nil
}

// Start sets up the SDK for c and makes it Flint's tracer provider (and
// the global one, with the W3C trace-context propagator, for a program's
// own spans). The returned function flushes what is buffered and stops
// it; call it at shutdown. With c.Enabled false it does nothing.
func Start(ctx context.Context, c Config) (shutdown func(context.Context) error, err error) {
	if !c.Enabled {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(c.ServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	// The sampler (OTEL_TRACES_SAMPLER, default parentbased_always_on)
	// and the batch processor (OTEL_BSP_*) read the environment.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	use(tp)
	return func(ctx context.Context) error {
		use(nil)
		return tp.Shutdown(ctx)
	}, nil
}

// StartFromEnv is Start(ConfigFromEnv(os.Getenv)).
func StartFromEnv(ctx context.Context) (func(context.Context) error, Config, error) {
	c, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, c, err
	}
	stop, err := Start(ctx, c)
	return stop, c, err
}
