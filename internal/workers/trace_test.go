package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestAttemptsContinueTheEnqueuingTrace: a job enqueued under the
// caller's span stores the enqueue span's context; each attempt's span
// (the failed first one, with its error as the status, and the retry) is
// a child of that enqueue span with the job's attributes, and a durable
// step that runs is a child of its attempt's span. Not parallel: tracing
// is process-wide.
func TestAttemptsContinueTheEnqueuingTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(tracing.IDGenerator()))
	tracing.Use(tp)
	t.Cleanup(func() { tracing.Use(nil) })
	b := setup(t)
	b.registry.Register("traced", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		if _, err := jobs.Step(ctx, "charge", func(ctx context.Context) (int, error) { return 42, nil }); err != nil {
			return nil, err
		}
		if j.Attempt == 1 {
			return nil, errors.New("card declined")
		}
		return "ok", nil
	}))
	ctx, caller := tp.Tracer("test").Start(b.ctx, "caller")
	p := jobs.EnqueueParams{Type: "traced", Payload: json.RawMessage(`{}`)}
	require.NoError(t, p.Validate(b.registry, time.Now()))
	res, err := b.store.Enqueue(ctx, p)
	require.NoError(t, err)
	caller.End()
	j := res[0].Job
	stored, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	enq := spanNamed(t, rec.Ended(), "flint enqueue")
	require.Equal(t, caller.SpanContext().SpanID(), enq.Parent().SpanID())
	require.Equal(t, tracing.Format(enq.SpanContext()), stored.Traceparent, "the job carries the enqueue span's context")

	b.start(t, workers.Config{Workers: 2})
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateScheduled))
	require.Equal(t, 1, b.promoteAll(t))
	b.waitFor(t, j.ID, 30*time.Second, status(jobs.StateCompleted))
	var runs []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		runs = runs[:0]
		for _, s := range rec.Ended() {
			if s.Name() == "flint run traced" {
				runs = append(runs, s)
			}
		}
		return len(runs) == 2
	}, 10*time.Second, 10*time.Millisecond)
	for i, run := range runs {
		require.Equal(t, enq.SpanContext().SpanID(), run.Parent().SpanID(), "attempt %d continues the enqueue's trace", i+1)
		require.Equal(t, enq.SpanContext().TraceID(), run.SpanContext().TraceID())
		attrs := map[string]string{}
		for _, a := range run.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
		}
		require.Equal(t, j.ID.String(), attrs["flint.job.id"])
		require.Equal(t, "default", attrs["flint.job.queue"])
		require.Equal(t, []string{"1", "2"}[i], attrs["flint.job.attempt"])
		require.Equal(t, []string{"failed", "succeeded"}[i], attrs["flint.job.outcome"])
	}
	require.Equal(t, codes.Error, runs[0].Status().Code)
	require.Equal(t, "card declined", runs[0].Status().Description)
	require.Equal(t, codes.Ok, runs[1].Status().Code)
	step := spanNamed(t, rec.Ended(), "flint step charge")
	require.Equal(t, runs[0].SpanContext().SpanID(), step.Parent().SpanID(), "the step ran in the first attempt")
	require.Len(t, runs[1].Events(), 1, "the retry replays the recorded step")
	require.Equal(t, "flint step replayed", runs[1].Events()[0].Name)
}

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, name)
	return found[0]
}
