//go:build chaos || soak

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
)

// seriesTally counts the occurrences of a series (in jobs and the history)
// and those enqueued twice (two jobs for the same time).
func seriesTally(t *testing.T, s *db.Store, schedule uuid.UUID) (total, doubled int) {
	t.Helper()
	var distinct int
	require.NoError(t, s.Pool().QueryRow(db.WithStatementTimeout(context.Background(), 15*time.Minute), `SELECT count(*), count(DISTINCT scheduled_for) FROM
		(SELECT scheduled_for FROM jobs WHERE schedule_id = $1 UNION ALL SELECT scheduled_for FROM job_history WHERE schedule_id = $1) o`,
		schedule).Scan(&total, &distinct))
	return total, total - distinct
}
