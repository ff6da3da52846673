package workers_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// A worker process registers the job types it has handlers for with every
// heartbeat, so the database knows which live workers can run a type; it
// deregisters when it stops.
func TestPresenceReportsJobTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	presence := workers.NewPresence(domain.WorkerInfo{ID: "w-types", Queues: []string{"reports"}, Concurrency: 3}, b.registry,
		50*time.Millisecond, b.store, nil, quietLogger())
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- presence.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	live := func() []domain.WorkerInfo {
		ws, err := b.store.ListWorkers(b.ctx, time.Minute)
		require.NoError(t, err)
		return ws
	}
	require.Eventually(t, func() bool { return len(live()) == 1 }, 10*time.Second, 20*time.Millisecond)
	w := live()[0]
	require.Equal(t, "w-types", w.ID)
	require.Equal(t, []string{"reports"}, w.Queues)
	require.Equal(t, b.registry.Types(), w.Types)
	require.Contains(t, w.Types, jobs.TypeHTTPRequest)

	// A handler registered later is reported by the next heartbeat.
	b.registry.Register("report.build", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) { return nil, nil }))
	require.Eventually(t, func() bool {
		ws := live()
		return len(ws) == 1 && slices.Contains(ws[0].Types, "report.build")
	}, 10*time.Second, 20*time.Millisecond)

	cancel()
	require.NoError(t, <-done)
	require.Empty(t, live(), "deregistered on stop")
	done <- nil // for the cleanup
}
