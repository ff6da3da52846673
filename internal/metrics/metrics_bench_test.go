package metrics

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func TestConcurrentObservation(t *testing.T) {
	t.Parallel()
	m := New("dev")
	events, _ := realisticEvents()
	const goroutines, rounds = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range rounds {
				m.ObserveEvents(events)
				m.ObserveRun("send_email", domain.OutcomeSucceeded, time.Millisecond)
				m.ObserveReaped([]domain.Moved{{Status: jobs.StateQueued, Type: fmt.Sprintf("t%d", g), Queue: "default"}})
				if i%50 == 0 {
					_, _ = m.Registry().Gather()
				}
			}
		})
	}
	wg.Wait()
	_, _, s := scrape(t, m.Handler(), nil)
	total := float64(goroutines * rounds)
	require.Equal(t, 6*total, s[`flint_jobs_enqueued_total{queue="default",type="send_email"}`])
	require.Equal(t, 5*total, s[`flint_jobs_finished_total{outcome="succeeded",queue="default",type="send_email"}`])
	require.Equal(t, total, s[`flint_job_duration_seconds_count{outcome="succeeded",type="send_email"}`])
	require.Equal(t, total, s[`flint_lease_expiries_total`])
	require.Equal(t, float64(rounds), s[`flint_jobs_finished_total{outcome="interrupted",queue="default",type="t3"}`])
}

// benchEvents is a steady mix: 10 types over 4 queues going through
// enqueue, claim and completion, with some retries.
func benchEvents(n int) []domain.Event {
	now := time.Now()
	out := make([]domain.Event, 0, n)
	for i := 0; len(out) < n; i++ {
		typ, queue := fmt.Sprintf("type%d", i%10), fmt.Sprintf("queue%d", i%4)
		id := uuid.New()
		out = append(out,
			domain.Event{JobID: id, Status: jobs.StateQueued, Type: typ, Queue: queue, At: now, RunAt: now},
			domain.Event{JobID: id, Status: jobs.StateRunning, Type: typ, Queue: queue, Attempt: 1, At: now.Add(3 * time.Millisecond), RunAt: now})
		if i%10 == 0 {
			out = append(out, domain.Event{JobID: id, Status: jobs.StateScheduled, Type: typ, Queue: queue, Attempt: 1, At: now, RunAt: now.Add(time.Second)})
		} else {
			out = append(out, domain.Event{JobID: id, Status: jobs.StateCompleted, Type: typ, Queue: queue, Attempt: 1, At: now, RunAt: now})
		}
	}
	return out[:n]
}

// BenchmarkObserveEvents reports the cost per event in batches as the store
// publishes them (claims and finishes arrive in batches of many jobs).
func BenchmarkObserveEvents(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			m := New("bench")
			events := benchEvents(batch)
			// Sort-free, realistic order: each job's events are adjacent,
			// so consecutive events rarely share (type, queue, outcome).
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				m.ObserveEvents(events)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
		})
	}
	b.Run("parallel/batch=1000", func(b *testing.B) {
		m := New("bench")
		events := benchEvents(1000)
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.ObserveEvents(events)
			}
		})
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/event")
	})
}
