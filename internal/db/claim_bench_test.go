package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// BenchmarkClaim measures one claim of 100 jobs from a backlog, with the
// previous claim's jobs finished in between (not timed), under each kind
// of queue limit set far above what the claims reach: what enforcing a
// limit that never binds costs a claim.
//
//	go test -run '^$' -bench BenchmarkClaim -benchtime 300x ./db/
func BenchmarkClaim(b *testing.B) {
	many := domain.MaxQueueConcurrency
	variants := []struct {
		name string
		set  func(q domain.QueueSettings) domain.QueueSettings
	}{
		{"none", nil},
		{"concurrency", func(q domain.QueueSettings) domain.QueueSettings { q.Concurrency = &many; return q }},
		{"rate", func(q domain.QueueSettings) domain.QueueSettings {
			q.RateLimit = &domain.RateLimit{Limit: domain.MaxRateLimit, PeriodSeconds: 1}
			return q
		}},
		{"per-key", func(q domain.QueueSettings) domain.QueueSettings { q.PerKeyConcurrency = &many; return q }},
		{"all", func(q domain.QueueSettings) domain.QueueSettings {
			q.Concurrency, q.PerKeyConcurrency = &many, &many
			q.RateLimit = &domain.RateLimit{Limit: domain.MaxRateLimit, PeriodSeconds: 1}
			return q
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			store, _ := dbtest.NewStore(b)
			ctx := context.Background()
			if v.set != nil {
				_, err := store.UpdateQueue(ctx, jobs.DefaultQueue, "bench", v.set)
				if err != nil {
					b.Fatal(err)
				}
			}
			const batch = 100
			for left := (b.N + 2) * batch; left > 0; left -= 1000 {
				ps := make([]jobs.EnqueueParams, min(left, 1000))
				for i := range ps {
					ps[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
				}
				if _, err := store.Enqueue(ctx, ps...); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := store.Pool().Exec(ctx, `VACUUM ANALYZE jobs`); err != nil {
				b.Fatal(err)
			}
			var prev []*jobs.Job
			b.ResetTimer()
			for range b.N {
				got, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "bench", Limit: batch, LeaseTTL: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != batch {
					b.Fatalf("claimed %d, want %d", len(got), batch)
				}
				b.StopTimer()
				fs := make([]domain.Finish, len(prev))
				for i, j := range prev {
					fs[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded}
				}
				if _, _, err := store.FinishJobs(ctx, fs); err != nil {
					b.Fatal(err)
				}
				prev = got
				b.StartTimer()
			}
		})
	}
}
