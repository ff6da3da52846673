package db_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func TestEditAndReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "r", MaxRetries: &zero, Payload: json.RawMessage(`{"to":"old@example.com"}`)})
	child := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{j.ID}})
	b.finish(t, b.claimFirstOf(t, "r"), domain.Finish{Outcome: domain.OutcomeFailed, Error: "bad address"})
	require.Equal(t, jobs.StateCancelled, b.status(t, child.ID), "its failure cancelled the dependent")

	by := domain.AuditEntry{Actor: "ops@example.com", Source: "dashboard", IP: "10.0.0.1"}
	old, got, err := b.store.EditAndReplay(b.ctx, j.ID, json.RawMessage(`{"to":"new@example.com"}`), by)
	require.NoError(t, err)
	require.JSONEq(t, `{"to":"old@example.com"}`, string(old))
	require.Equal(t, jobs.StateQueued, got.Status)
	require.Zero(t, got.Attempt)
	require.JSONEq(t, `{"to":"new@example.com"}`, string(got.Payload))
	stored, err := b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"to":"new@example.com"}`, string(stored.Payload))
	require.Equal(t, jobs.StateBlocked, b.status(t, child.ID), "the dependent is re-armed, as a plain replay does")

	// The audit trail holds both payloads, written with the change.
	entries, err := b.store.ListAudit(b.ctx, domain.AuditQuery{JobID: &j.ID})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, domain.AuditEditReplay, entries[0].Action)
	require.Equal(t, "ops@example.com", entries[0].Actor)
	require.JSONEq(t, `{"payload_before":{"to":"old@example.com"},"payload_after":{"to":"new@example.com"}}`, string(entries[0].Details))

	// Not from the DLQ: refused, nothing changed, nothing recorded.
	_, _, err = b.store.EditAndReplay(b.ctx, j.ID, json.RawMessage(`{"to":"third@example.com"}`), by)
	var te *domain.TransitionError
	require.True(t, errors.As(err, &te), "%v", err)
	require.Equal(t, jobs.StateQueued, te.From)
	running := b.claimFirstOf(t, "r")
	require.Equal(t, j.ID, running.ID)
	_, _, err = b.store.EditAndReplay(b.ctx, j.ID, json.RawMessage(`{}`), by)
	require.True(t, errors.As(err, &te))
	require.Equal(t, jobs.StateRunning, te.From)
	stored, err = b.store.GetJob(b.ctx, j.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"to":"new@example.com"}`, string(stored.Payload))
	entries, err = b.store.ListAudit(b.ctx, domain.AuditQuery{JobID: &j.ID})
	require.NoError(t, err)
	require.Len(t, entries, 1)

	_, _, err = b.store.EditAndReplay(b.ctx, uuid.New(), json.RawMessage(`{}`), by)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// TestDLQTriage: the dead-letter queue grouped by type and error (the
// history's part included), listed oldest first or from a point in time,
// and moved to the bin whole.
func TestDLQTriage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0
	fail := func(typ, msg string) uuid.UUID {
		t.Helper()
		j := b.enqueue(t, jobs.EnqueueParams{Type: typ, Queue: "triage", MaxRetries: &zero})
		b.finish(t, b.claimFirstOf(t, "triage"), domain.Finish{Outcome: domain.OutcomeFailed, Error: msg})
		return j.ID
	}
	// The oldest one moves to the history: still in the DLQ, and counted.
	ids := []uuid.UUID{fail("mail", "smtp: 550 no such user\nat line 3")}
	n, err := b.store.Archive(b.ctx, -time.Hour, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for range 2 {
		ids = append(ids, fail("mail", "smtp: 550 no such user\nat line 3"))
	}
	ids = append(ids, fail("mail", "timeout"), fail("fetch", "timeout"))

	groups, err := b.store.DLQGroups(b.ctx, 10)
	require.NoError(t, err)
	require.Len(t, groups, 3)
	require.Equal(t, domain.ErrorGroup{Type: "mail", Error: "smtp: 550 no such user", Count: 3, Latest: groups[0].Latest}, groups[0])
	got := map[string]int{}
	for _, g := range groups[1:] {
		got[g.Type+"/"+g.Error] = g.Count
	}
	require.Equal(t, map[string]int{"mail/timeout": 1, "fetch/timeout": 1}, got)

	dead := []jobs.State{jobs.StateDeadLetter}
	page, err := b.store.ListJobs(b.ctx, domain.ListParams{Statuses: dead, Oldest: true, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[0], ids[1]}, []uuid.UUID{page.Jobs[0].ID, page.Jobs[1].ID}, "oldest first, the history's too")
	page, err = b.store.ListJobs(b.ctx, domain.ListParams{Statuses: dead, Oldest: true, Limit: 2, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[2], ids[3]}, []uuid.UUID{page.Jobs[0].ID, page.Jobs[1].ID})
	_, err = b.store.ListJobs(b.ctx, domain.ListParams{Statuses: dead, Oldest: true, Q: "timeout"})
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "sort", ve.Field)

	// The moment ids[3] was made (a UUIDv7 starts with its millisecond).
	var ms int64
	for _, c := range ids[3][:6] {
		ms = ms<<8 | int64(c)
	}
	before := time.UnixMilli(ms)
	page, err = b.store.ListJobs(b.ctx, domain.ListParams{Statuses: dead, Before: &before})
	require.NoError(t, err)
	for _, j := range page.Jobs {
		require.True(t, j.ID.String() < ids[3].String(), "only jobs created before the time")
	}
	require.Len(t, page.Jobs, 3)

	deleted, err := b.store.DeleteDLQ(b.ctx, nil)
	require.NoError(t, err)
	require.ElementsMatch(t, ids, deleted)
	page, err = b.store.ListJobs(b.ctx, domain.ListParams{Statuses: dead})
	require.NoError(t, err)
	require.Empty(t, page.Jobs)
	page, err = b.store.ListJobs(b.ctx, domain.ListParams{InBin: true})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 5, "all in the bin, where they can be restored")
}
