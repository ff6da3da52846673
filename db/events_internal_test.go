package db

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"flint/jobs"
)

// TestNotifyPayloads: every payload fits PostgreSQL's NOTIFY limit, is a
// JSON array, and together they carry every event once, in order.
func TestNotifyPayloads(t *testing.T) {
	require.Empty(t, notifyPayloads(nil))
	for _, n := range []int{1, 49, 50, 51, 1000} {
		events := make([]jobs.Event, n)
		for i := range events {
			events[i] = jobs.Event{JobID: uuid.New(), Status: jobs.StateCompleted, Type: strings.Repeat("t", i%64),
				Queue: "default", Attempt: i % 5, At: time.Now().UTC()}
		}
		payloads := notifyPayloads(events)
		var got []jobs.Event
		for _, p := range payloads {
			require.LessOrEqual(t, len(p), maxNotifyPayload)
			require.Less(t, len(p), 8000)
			var part []jobs.Event
			require.NoError(t, json.Unmarshal([]byte(p), &part), p)
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
