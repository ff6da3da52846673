package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flinthq/flint/db"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkDurableSteps measures what recorded steps cost, against the
// same number of plain jobs, in one run on one PostgreSQL (each workload
// on a fresh database with one in-process pool at its defaults, timed
// from submission to the last completion, alternating):
//
//   - noop: 10,000 noop jobs enqueued in one batch;
//   - steps: 10,000 jobs enqueued in one batch, each recording three
//     no-op steps (jobs.Step returning 1) and returning their sum.
//
// steps-jobs/s is the figure to set beside DBOS's three-step workflows
// per second (its harness under ../shared/peers/dbosbench); step-ratio is
// the steps workload's time over noop's.
//
// make bench BENCH=DurableSteps BENCHPKG=./internal/e2e BENCHTIME=3x
func BenchmarkDurableSteps(b *testing.B) {
	var noop, steps time.Duration
	round := 0
	for b.Loop() {
		if round%2 == 0 {
			noop += wfDrain(b, wfNoops)
			steps += wfDrain(b, durableSteps)
		} else {
			steps += wfDrain(b, durableSteps)
			noop += wfDrain(b, wfNoops)
		}
		round++
	}
	n := float64(b.N)
	b.ReportMetric(10_000/(noop.Seconds()/n), "noop-jobs/s")
	b.ReportMetric(10_000/(steps.Seconds()/n), "steps-jobs/s")
	b.ReportMetric(30_000/(steps.Seconds()/n), "steps/s")
	b.ReportMetric(steps.Seconds()/noop.Seconds(), "step-ratio")
}

// durableSteps is 10,000 jobs of three recorded no-op steps each.
func durableSteps(b *testing.B, store *db.Store, reg *jobs.Registry) (int64, func()) {
	one := func(context.Context) (int, error) { return 1, nil }
	reg.Register("three-steps", jobs.HandlerFunc(func(ctx context.Context, _ *jobs.Job) (any, error) {
		sum := 0
		for _, name := range []string{"one", "two", "three"} {
			v, err := jobs.Step(ctx, name, one)
			if err != nil {
				return nil, err
			}
			sum += v
		}
		return sum, nil
	}))
	params := make([]jobs.EnqueueParams, 10_000)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "three-steps", Queue: jobs.DefaultQueue, Priority: 2, Payload: json.RawMessage(`{}`)}
	}
	return 10_000, func() { wfEnqueue(b, store, params) }
}
