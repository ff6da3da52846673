package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

func TestStateValues(t *testing.T) {
	t.Parallel()
	// The stored strings are matched by the database's CHECK constraint;
	// changing one needs a migration. Claimed is stored as running (with no
	// started_at yet).
	want := []string{"blocked", "scheduled", "queued", "running", "waiting", "completed", "dead_letter", "cancelled"}
	var got []string
	for _, s := range jobs.States {
		require.True(t, s.Valid())
		if st := string(s.Stored()); len(got) == 0 || got[len(got)-1] != st {
			got = append(got, st)
		}
	}
	require.Equal(t, want, got)
	require.Equal(t, jobs.StateRunning, jobs.StateClaimed.Stored())
	require.True(t, jobs.StateClaimed.Leased())
	require.False(t, jobs.State("started").Valid())
}
