package db_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestHeartbeatsAndFinishesNeverDeadlock: a worker's heartbeat and its
// batched finish write the same running rows at once, each listing them
// in its own order. Both send their rows in id order, and a statement
// PostgreSQL still ends to break a deadlock (40P01; a plan may read jobs
// before the array) is run again, so neither ever fails with it (a pull
// worker's finish answered 500 under load before).
func TestHeartbeatsAndFinishesNeverDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, rounds = 200, 6
	for round := range rounds {
		b.enqueueN(t, n, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "lo"})
		held := b.claimQ(t, n, nil, "lo")
		require.Len(t, held, n, "round %d", round)
		var g errgroup.Group
		g.Go(func() error { // heartbeats, newest first, until every lease is gone
			beats := make([]domain.Heartbeat, len(held))
			for i, j := range held {
				beats[len(held)-1-i] = domain.Heartbeat{Lease: domain.LeaseOf(j)}
			}
			for {
				alive, err := b.store.ExtendLeases(b.ctx, beats, time.Minute)
				if err != nil || len(alive) == 0 {
					return err
				}
			}
		})
		g.Go(func() error { // finishes in batches of 50, in a random order
			order := slices.Clone(held)
			rand.Shuffle(len(order), func(i, k int) { order[i], order[k] = order[k], order[i] })
			for chunk := range slices.Chunk(order, 50) {
				fs := make([]domain.Finish, len(chunk))
				for i, j := range chunk {
					fs[i] = domain.Finish{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded}
				}
				if _, _, err := b.store.FinishJobs(b.ctx, fs); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, g.Wait(), "round %d", round)
	}
}
