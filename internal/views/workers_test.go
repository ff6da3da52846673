package views

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

// TestWorkersTableShowsEveryProcess: processes that run only the API or
// the scheduler are listed with their roles and version and no slots; the
// page says no worker runs until one that runs jobs is there.
func TestWorkersTableShowsEveryProcess(t *testing.T) {
	now := time.Now()
	api := domain.WorkerInfo{ID: "api-one", Kind: domain.WorkerProcess, Roles: []string{domain.RoleAPI}, Version: "v0.1.0", StartedAt: now, HeartbeatAt: now}
	render := func(ws ...domain.WorkerInfo) string {
		var b bytes.Buffer
		require.NoError(t, WorkersTable(ws, now).Render(context.Background(), &b))
		return b.String()
	}
	page := render(api)
	require.Contains(t, page, `data-testid="no-workers"`, "an API process runs no jobs")
	require.Contains(t, page, `data-worker="api-one"`)
	require.Contains(t, page, "flint · api")
	require.Contains(t, page, "v0.1.0")
	require.NotContains(t, page, `data-testid="worker-busy"`, "no slots to be busy in")

	worker := domain.WorkerInfo{ID: "w-one", Kind: domain.WorkerProcess, Roles: []string{domain.RoleWorkers}, Concurrency: 4, StartedAt: now, HeartbeatAt: now}
	old := domain.WorkerInfo{ID: "w-old", Kind: domain.WorkerProcess, Concurrency: 2, StartedAt: now, HeartbeatAt: now} // before roles
	page = render(api, worker, old)
	require.NotContains(t, page, `data-testid="no-workers"`)
	require.Equal(t, 2, strings.Count(page, `data-testid="worker-busy"`), "the two worker processes have slots")
	require.Contains(t, page, "0 / 4")
	require.Contains(t, page, "0 / 2")
}
