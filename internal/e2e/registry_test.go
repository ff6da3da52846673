package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// TestEveryProcessInTheRegistry: API, scheduler and worker processes each
// keep an entry in the registry with their roles and version (what flint
// migrate reads to find older processes, and what the Workers page and
// GET /api/v1/workers show); only the worker has slots, and a queue no
// worker serves is explained as such even while the API and scheduler
// run.
func TestEveryProcessInTheRegistry(t *testing.T) {
	t.Parallel()
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	startFlint(t, "api", u, "FLINT_ADDR="+addr, "FLINT_WORKER_ID=api-one").ready(t, 60*time.Second)
	startFlint(t, "scheduler", u, "FLINT_WORKER_ID=sched-one").ready(t, 60*time.Second)
	startFlint(t, "worker", u, "FLINT_WORKER_ID=worker-one", "FLINT_QUEUES=default").ready(t, 60*time.Second)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)

	type entry struct {
		ID          string   `json:"id"`
		Kind        string   `json:"kind"`
		Roles       []string `json:"roles"`
		Concurrency int      `json:"concurrency"`
		Version     string   `json:"version"`
	}
	var got map[string]entry
	waitFor(t, 30*time.Second, "three processes in the registry", func() bool {
		var ws struct {
			Workers []entry `json:"workers"`
		}
		require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/workers", nil, &ws))
		got = map[string]entry{}
		for _, w := range ws.Workers {
			got[w.ID] = w
		}
		return len(got) == 3
	})
	require.Equal(t, []string{"api"}, got["api-one"].Roles)
	require.Equal(t, []string{"scheduler"}, got["sched-one"].Roles)
	require.Equal(t, []string{"workers"}, got["worker-one"].Roles)
	for id, w := range got {
		require.Equal(t, "process", w.Kind, id)
		require.NotEmpty(t, w.Version, id)
	}
	require.Zero(t, got["api-one"].Concurrency)
	require.Zero(t, got["sched-one"].Concurrency)
	require.Positive(t, got["worker-one"].Concurrency)

	// What flint migrate reads for a migration older processes cannot live
	// with: every live Flint process, whatever it runs.
	conn := openStore(t, u)
	rows, err := conn.Pool().Query(context.Background(), `SELECT id FROM workers WHERE kind = 'process' ORDER BY id`)
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"api-one", "sched-one", "worker-one"}, ids)

	// The API and the scheduler run nothing: a job of a queue only they
	// would "serve" (no queue list means all queues) is still explained as
	// unserved.
	var job map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs", `{"type": "noop", "queue": "reports"}`, &job))
	var explain struct {
		Reasons []struct {
			Code string `json:"code"`
		} `json:"reasons"`
	}
	require.Equal(t, http.StatusOK, api.do(t, http.MethodGet, "/api/v1/jobs/"+job["id"].(string)+"/explain", nil, &explain))
	var codes []string
	for _, r := range explain.Reasons {
		codes = append(codes, r.Code)
	}
	require.True(t, slices.Contains(codes, "no_worker_for_queue"), "explain: %v", codes)

}
