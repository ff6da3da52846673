package db_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestListOrderedByTime: a listing ordered by finish or start time, either
// way round, across jobs and the history, page by page and by a jump to
// a page; jobs without the time come first latest first, last oldest
// first.
func TestListOrderedByTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	run := func(startedAgo, finishedAgo time.Duration) uuid.UUID {
		t.Helper()
		j := b.enqueue(t, jobs.EnqueueParams{Queue: "sorted"})
		b.finish(t, b.claimFirstOf(t, "sorted"), domain.Finish{Outcome: domain.OutcomeSucceeded})
		_, err := b.store.Pool().Exec(b.ctx, `UPDATE jobs SET started_at = $2, finished_at = $3 WHERE id = $1`,
			j.ID, now.Add(-startedAgo), now.Add(-finishedAgo))
		require.NoError(t, err)
		return j.ID
	}
	a, bb := run(11*time.Minute, 10*time.Minute), run(3*time.Minute, 2*time.Minute)
	n, err := b.store.Archive(b.ctx, -time.Hour, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n, "two of them in the history")
	c, d := run(8*time.Minute, 7*time.Minute), run(6*time.Minute, 5*time.Minute)
	e := b.enqueue(t, jobs.EnqueueParams{Queue: "sorted", RunAt: new(now.Add(time.Hour))}).ID

	list := func(p domain.ListParams) []uuid.UUID {
		t.Helper()
		p.Queue = "sorted"
		var got []uuid.UUID
		for {
			page, err := b.store.ListJobs(b.ctx, p)
			require.NoError(t, err)
			if p.Limit > 0 {
				require.LessOrEqual(t, len(page.Jobs), p.Limit)
			}
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if page.NextCursor == "" {
				return got
			}
			p.Cursor, p.Offset = page.NextCursor, 0
		}
	}
	require.Equal(t, []uuid.UUID{e, bb, d, c, a}, list(domain.ListParams{By: domain.SortFinished, Limit: 2}), "latest finished first, the unfinished before them")
	require.Equal(t, []uuid.UUID{a, c, d, bb, e}, list(domain.ListParams{By: domain.SortFinished, Oldest: true, Limit: 2}))
	require.Equal(t, []uuid.UUID{e, bb, d, c, a}, list(domain.ListParams{By: domain.SortStarted, Limit: 1}))
	require.Equal(t, []uuid.UUID{a, c, d, bb, e}, list(domain.ListParams{By: domain.SortStarted, Oldest: true, Limit: 3}))
	require.Equal(t, []uuid.UUID{e, d, c, bb, a}, list(domain.ListParams{Limit: 2}), "by creation, as before")
	require.Equal(t, []uuid.UUID{bb, d, c, a}, list(domain.ListParams{By: domain.SortFinished, Statuses: []jobs.State{jobs.StateCompleted}, Limit: 3}))

	// A jump to the second page of two, then on from there.
	require.Equal(t, []uuid.UUID{d, c, a}, list(domain.ListParams{By: domain.SortFinished, Limit: 2, Offset: 2}))
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Queue: "sorted", Limit: 2, Offset: 4})
	require.NoError(t, err)
	require.Equal(t, a, page.Jobs[0].ID)
	require.Empty(t, page.NextCursor)

	// Finished before a time, latest first.
	before := now.Add(-6 * time.Minute)
	require.Equal(t, []uuid.UUID{c, a}, list(domain.ListParams{By: domain.SortFinished, Before: &before}))

	for _, bad := range []domain.ListParams{
		{By: "size"},
		{By: domain.SortFinished, InBin: true},
		{Offset: domain.MaxListOffset + 1},
		{Offset: 2, Cursor: page.NextCursor + "x"},
		{By: domain.SortFinished, Q: "noop"},
	} {
		_, err := b.store.ListJobs(b.ctx, bad)
		var ve *jobs.ValidationError
		require.ErrorAs(t, err, &ve, "%+v", bad)
	}
	// A cursor of one order does not continue another.
	first, err := b.store.ListJobs(b.ctx, domain.ListParams{Queue: "sorted", Limit: 1})
	require.NoError(t, err)
	_, err = b.store.ListJobs(b.ctx, domain.ListParams{Queue: "sorted", By: domain.SortFinished, Cursor: first.NextCursor})
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "cursor", ve.Field)
}
