package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Plain jobs (no dependencies, no series) are written with COPY when the
// batch is large and has no idempotency keys, otherwise by a statement that
// returns only what the database decided. Either way, what Enqueue returns
// must be what is stored, and the notifications must be the insert
// statement's.
func TestEnqueuePlainJobsReturnWhatIsStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
		keys bool
	}{{"copy", 200, false}, {"statement", 20, false}, {"statement with keys", 200, true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testPlainJobsReturnWhatIsStored(t, tc.n, tc.keys)
		})
	}
}

// plainParams are size jobs of every kind the plain enqueue paths take:
// three queues and priorities, delayed, past and future run times, a
// timeout, no retries, concurrency keys (with payloads beyond ASCII), and
// idempotency keys if keys.
func plainParams(size int, keys bool) []jobs.EnqueueParams {
	past := time.Now().Add(-time.Hour)
	future := time.Now().Add(3 * time.Hour)
	zero := 0
	params := make([]jobs.EnqueueParams, size)
	for i := range params {
		p := jobs.EnqueueParams{
			Type:     jobs.TypeNoop,
			Queue:    []string{"", "alpha", "beta"}[i%3],
			Payload:  json.RawMessage(fmt.Sprintf(`{ "n" : %d, "b":[1, 2] }`, i)),
			Priority: 1 + i%3,
		}
		if keys {
			p.IdempotencyKey = fmt.Sprintf("key-%d", i)
		}
		if i%7 == 0 {
			p.ConcurrencyKey = fmt.Sprintf("tenant-%d", i%3)
			p.Payload = json.RawMessage(fmt.Sprintf(`{"n": %d, "s": "ü € \u0041 \n"}`, i))
		}
		switch i % 5 {
		case 1:
			p.Delay = time.Duration(i) * time.Second
		case 2:
			p.RunAt = &past
		case 3:
			p.RunAt = &future
			p.TimeoutSeconds = 30
		case 4:
			p.MaxRetries = &zero
			p.Queue = "alpha"
		}
		params[i] = p
	}
	return params
}

func testPlainJobsReturnWhatIsStored(t *testing.T, size int, keys bool) {
	b := setup(t)
	conn, err := pgx.Connect(b.ctx, b.url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(b.ctx, `LISTEN `+db.ChannelJobs+`; LISTEN `+db.ChannelScheduled)
	require.NoError(t, err)

	params := plainParams(size, keys)
	wantScheduled := map[uuid.UUID]bool{}
	res, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)
	require.Len(t, res, len(params))
	for i, r := range res {
		require.True(t, r.Inserted)
		if keys {
			require.Equal(t, params[i].IdempotencyKey, *r.Job.IdempotencyKey)
		}
		got, err := b.store.GetJob(b.ctx, r.Job.ID)
		require.NoError(t, err, "job %d", i)
		require.JSONEq(t, string(got.Payload), string(r.Job.Payload), "job %d", i)
		require.JSONEq(t, string(params[i].Payload), string(got.Payload), "job %d", i)
		stored, returned := *got, *r.Job
		stored.Payload, returned.Payload = nil, nil
		require.Equal(t, stored, returned, "job %d: returned as stored", i)
		switch i % 5 {
		case 1, 3:
			require.Equal(t, jobs.StateScheduled, got.Status, "job %d", i)
			wantScheduled[got.ID] = true
		default:
			require.Equal(t, jobs.StateQueued, got.Status, "job %d", i)
		}
		if i%5 == 3 {
			require.Equal(t, 30, got.TimeoutSeconds, "job %d", i)
		} else {
			require.Zero(t, got.TimeoutSeconds, "job %d", i)
		}
	}
	require.Equal(t, 0, res[4].Job.MaxRetries)
	require.Equal(t, "default", res[0].Job.Queue)
	require.WithinDuration(t, res[1].Job.CreatedAt.Add(time.Second), res[1].Job.RunAt, time.Millisecond)

	// One wake-up per queue that gained queued jobs, and every scheduled
	// job announced to the promoter with its run time.
	queues := map[string]int{}
	timers := map[uuid.UUID]int64{}
	for len(timers) < len(wantScheduled) || len(queues) < 3 {
		wctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		require.NoError(t, err, "notifications so far: queues %v, %d timers", queues, len(timers))
		if n.Channel == db.ChannelJobs {
			queues[n.Payload]++
			continue
		}
		for _, part := range strings.Split(n.Payload, ",") {
			f := strings.Fields(part)
			require.Len(t, f, 4, part)
			var ms int64
			_, err := fmt.Sscan(f[1], &ms)
			require.NoError(t, err)
			timers[uuid.MustParse(f[0])] = ms
		}
	}
	require.Equal(t, map[string]int{"default": 1, "alpha": 1, "beta": 1}, queues)
	require.Len(t, timers, len(wantScheduled))
	for _, r := range res {
		if wantScheduled[r.Job.ID] {
			require.InDelta(t, r.Job.RunAt.UnixMilli(), timers[r.Job.ID], 1, "timer of %s", r.Job.ID)
		}
	}
}

// A large batch in which one job has an idempotency key still goes through
// the insert statement and its ON CONFLICT: the key is honoured.
func TestEnqueueLargeBatchWithAKeyHonoursIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.enqueue(t, jobs.EnqueueParams{IdempotencyKey: "once", Payload: json.RawMessage(`{"first":true}`)})
	params := make([]jobs.EnqueueParams, 100)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop}
	}
	params[50].IdempotencyKey = "once"
	res, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)
	require.False(t, res[50].Inserted)
	require.Equal(t, first.ID, res[50].Job.ID)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs`).Scan(&n))
	require.Equal(t, 100, n)
}

// TestEnqueueGraphByCopyReturnsWhatIsStored: a large workflow (some jobs
// blocked on others of the submission, some on a completed job, some
// free) and a large batch are written with COPY in their transaction;
// each job comes back as stored, with its status, parents flag, batch and
// step key, and the edges and keys are all there.
func TestEnqueueGraphByCopyReturnsWhatIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done := b.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "pre"})
	b.complete(t, "pre", `{"x": 1}`)
	params := plainParams(150, false)
	wf := uuid.Must(uuid.NewV7())
	for i := range params {
		params[i].ID = uuid.Must(uuid.NewV7())
		params[i].StepKey, params[i].WorkflowID = fmt.Sprintf("k%d", i), wf
		switch {
		case i%3 == 1:
			params[i].DependsOn = []uuid.UUID{params[i-1].ID}
		case i%3 == 2:
			params[i].DependsOn = []uuid.UUID{done.ID}
		}
	}
	res, err := b.store.Enqueue(b.ctx, params...)
	require.NoError(t, err)
	for i, r := range res {
		got, err := b.store.GetJob(b.ctx, r.Job.ID)
		require.NoError(t, err, "job %d", i)
		stored, returned := *got, *r.Job
		stored.Payload, returned.Payload = nil, nil
		require.Equal(t, stored, returned, "job %d: returned as stored", i)
		require.Equal(t, i%3 != 0, got.HasParents, "job %d", i)
		if i%3 == 1 {
			require.Equal(t, jobs.StateBlocked, got.Status, "job %d waits for the one before", i)
		}
	}
	var edges, keys int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT (SELECT count(*) FROM job_dependencies), (SELECT count(*) FROM workflow_steps WHERE workflow_id = $1)`, wf).Scan(&edges, &keys))
	require.Equal(t, 100, edges)
	require.Equal(t, 150, keys)

	batch, out, err := b.store.CreateBatch(b.ctx, domain.BatchParams{Jobs: plainParams(120, false)})
	require.NoError(t, err)
	for i, r := range out {
		got, err := b.store.GetJob(b.ctx, r.Job.ID)
		require.NoError(t, err)
		stored, returned := *got, *r.Job
		stored.Payload, returned.Payload = nil, nil
		require.Equal(t, stored, returned, "member %d: returned as stored", i)
		require.Equal(t, batch.ID, *got.BatchID)
	}
}
