package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"flint/db/dbtest"
	"flint/jobs"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestPromoterPromotesDueJobsOnly(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	soon := time.Now().Add(300 * time.Millisecond)
	later := time.Now().Add(time.Hour)
	res, err := store.Enqueue(ctx,
		jobs.EnqueueParams{Type: "noop", RunAt: &soon},
		jobs.EnqueueParams{Type: "noop", RunAt: &later})
	require.NoError(t, err)
	var moved []jobs.Moved
	p := NewPromoter(PromoterConfig{Interval: 50 * time.Millisecond, OnMoved: func(m []jobs.Moved) { moved = append(moved, m...) }}, store, quiet())

	n, _, err := p.runOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is due yet")
	require.Eventually(t, func() bool {
		n, _, err := p.runOnce(ctx)
		return err == nil && n == 1
	}, 10*time.Second, 50*time.Millisecond)
	require.Len(t, moved, 1)
	require.Equal(t, res[0].Job.ID, moved[0].JobID)
	j, err := store.GetJob(ctx, res[1].Job.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateScheduled, j.Status)
}

func TestPromoterBatches(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	params := make([]jobs.EnqueueParams, 25)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: "noop", Delay: time.Millisecond}
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	p := NewPromoter(PromoterConfig{BatchSize: 10}, store, quiet())
	n, full, err := p.runOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	require.True(t, full, "a full batch asks for another pass at once")
	runCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	go func() { _ = p.Run(runCtx) }()
	require.Eventually(t, func() bool {
		st, err := store.Stats(ctx)
		return err == nil && st.ByStatus["queued"] == 25
	}, 3*time.Second, 20*time.Millisecond)
}

func TestReaperRequeuesExpiredLeases(t *testing.T) {
	t.Parallel()
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: "noop"}, jobs.EnqueueParams{Type: "noop"})
	require.NoError(t, err)
	short, err := store.ClaimJobs(ctx, jobs.ClaimParams{WorkerID: "dead", Limit: 1, LeaseTTL: 200 * time.Millisecond})
	require.NoError(t, err)
	_, err = store.ClaimJobs(ctx, jobs.ClaimParams{WorkerID: "alive", Limit: 1, LeaseTTL: time.Hour})
	require.NoError(t, err)

	var moved []jobs.Moved
	r := NewReaper(ReaperConfig{Interval: 50 * time.Millisecond, OnMoved: func(m []jobs.Moved) { moved = append(moved, m...) }}, store, quiet())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- r.Run(runCtx) }()
	require.Eventually(t, func() bool {
		j, err := store.GetJob(ctx, short[0].ID)
		return err == nil && j.Status == jobs.StateQueued
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.Len(t, moved, 1)
	require.Equal(t, short[0].ID, moved[0].JobID)
	for _, r := range res {
		if r.Job.ID != short[0].ID {
			j, err := store.GetJob(ctx, r.Job.ID)
			require.NoError(t, err)
			require.Equal(t, jobs.StateRunning, j.Status, "a live lease is left alone")
		}
	}
}
