package db_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"flint/jobs"
)

func TestEditAndReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	zero := 0
	j := b.enqueue(t, jobs.EnqueueParams{Queue: "r", MaxRetries: &zero, Payload: json.RawMessage(`{"to":"old@example.com"}`)})
	child := b.enqueue(t, jobs.EnqueueParams{DependsOn: []uuid.UUID{j.ID}})
	b.finish(t, b.claimFirstOf(t, "r"), jobs.Finish{Outcome: jobs.OutcomeFailed, Error: "bad address"})
	require.Equal(t, jobs.StateCancelled, b.status(t, child.ID), "its failure cancelled the dependent")

	by := jobs.AuditEntry{Actor: "ops@example.com", Source: "dashboard", IP: "10.0.0.1"}
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
	entries, err := b.store.ListAudit(b.ctx, jobs.AuditQuery{JobID: &j.ID})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, jobs.AuditEditReplay, entries[0].Action)
	require.Equal(t, "ops@example.com", entries[0].Actor)
	require.JSONEq(t, `{"payload_before":{"to":"old@example.com"},"payload_after":{"to":"new@example.com"}}`, string(entries[0].Details))

	// Not from the DLQ: refused, nothing changed, nothing recorded.
	_, _, err = b.store.EditAndReplay(b.ctx, j.ID, json.RawMessage(`{"to":"third@example.com"}`), by)
	var te *jobs.TransitionError
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
	entries, err = b.store.ListAudit(b.ctx, jobs.AuditQuery{JobID: &j.ID})
	require.NoError(t, err)
	require.Len(t, entries, 1)

	_, _, err = b.store.EditAndReplay(b.ctx, uuid.New(), json.RawMessage(`{}`), by)
	require.ErrorIs(t, err, jobs.ErrNotFound)
}
