package db

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// TestNotifyPayloads: every payload fits PostgreSQL's NOTIFY limit, is a
// JSON array, and together they carry every event once, in order.
func TestNotifyPayloads(t *testing.T) {
	const origin = "0123456789abcdef"
	require.Empty(t, notifyPayloads(origin, nil))
	for _, n := range []int{1, 49, 50, 51, 1000} {
		events := make([]domain.Event, n)
		for i := range events {
			events[i] = domain.Event{JobID: uuid.New(), Status: jobs.StateCompleted, Type: strings.Repeat("t", i%64),
				Queue: "default", Attempt: i % 5, At: time.Now().UTC()}
		}
		payloads := notifyPayloads(origin, events)
		var got []domain.Event
		for _, p := range payloads {
			require.LessOrEqual(t, len(p), maxNotifyPayload)
			require.Less(t, len(p), 8000)
			var part []domain.Event
			body, ok := strings.CutPrefix(p, origin+" ")
			require.True(t, ok, "tagged with the origin: %.40s", p)
			require.NoError(t, json.Unmarshal([]byte(body), &part), p)
			require.NotEmpty(t, part)
			got = append(got, part...)
		}
		require.Len(t, got, n)
		for i := range got {
			require.Equal(t, events[i].JobID, got[i].JobID)
			require.Equal(t, events[i].Type, got[i].Type)
		}
		// Packed, not split at a fixed count: every payload but the last
		// is too full to take one more event.
		largest := 0
		for _, e := range events {
			enc, err := json.Marshal(e)
			require.NoError(t, err)
			largest = max(largest, len(enc))
		}
		for _, p := range payloads[:len(payloads)-1] {
			require.Greater(t, len(p)+largest+1, maxNotifyPayload)
		}
	}
}

// A process skips its own events when they come back through NOTIFY or
// Redis (it delivered them when it sent them), and takes every other
// process's, tagged or from a Flint before tags.
func TestReceiveSkipsOwnEvents(t *testing.T) {
	var got []domain.Event
	b := &EventBus{origin: newOrigin(), deliver: func(evs []domain.Event) { got = append(got, evs...) }}
	other := &EventBus{origin: newOrigin()}
	require.NotEqual(t, b.origin, other.origin)
	mine := domain.Event{JobID: uuid.New(), Status: jobs.StateQueued, At: time.Now()}
	theirs := domain.Event{JobID: uuid.New(), Status: jobs.StateRunning, At: time.Now()}
	legacy := domain.Event{JobID: uuid.New(), Status: jobs.StateCompleted, At: time.Now()}

	for _, p := range notifyPayloads(b.origin, []domain.Event{mine}) {
		b.ReceivePostgres(p)
	}
	require.Empty(t, got, "own events are not delivered twice")
	for _, p := range notifyPayloads(other.origin, []domain.Event{theirs}) {
		b.ReceivePostgres(p)
	}
	enc, err := json.Marshal([]domain.Event{legacy})
	require.NoError(t, err)
	b.receive(enc)
	b.receive([]byte("not json"))
	b.receive([]byte(other.origin + " [garbage"))
	require.Len(t, got, 2)
	require.Equal(t, theirs.JobID, got[0].JobID)
	require.Equal(t, legacy.JobID, got[1].JobID)
}
