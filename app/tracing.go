package app

import (
	"context"
	"time"

	"github.com/flinthq/flint/internal/tracing"
)

// startTracing sets up OpenTelemetry tracing from the standard OTEL_*
// variables (off unless an OTLP endpoint is configured) and flushes the
// spans still buffered when the process stops.
func (p *process) startTracing() error {
	stop, c, err := tracing.StartFromEnv(p.ctx)
	if err != nil {
		return err
	}
	if !c.Enabled {
		return nil
	}
	p.logger.Info("tracing on: spans are exported with OTLP", "service_name", c.ServiceName)
	p.cleanup = append(p.cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stop(ctx); err != nil {
			p.logger.Warn("tracing: flushing spans at shutdown failed", "error", err)
		}
	})
	return nil
}
