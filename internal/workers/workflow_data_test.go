package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// Items is what the "extract" handler returns and its children read.
type Items struct {
	Items []int `json:"items"`
}

// TestGoHandlersFanOutAndJoin: in-process Go handlers of a workflow read
// their parents' results through the context: "split" reads "fetch"'s
// items with jobs.ParentResult and spawns one "square" per item (1,000 of
// them) plus a "sum" join over all of them; the join reads every square's
// result and adds them up.
func TestGoHandlersFanOutAndJoin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 1000
	sums := make(chan int, 1)
	b.registry.Register("fetch", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		items := make([]int, n)
		for i := range items {
			items[i] = i + 1
		}
		return Items{Items: items}, nil
	}))
	b.registry.Register("split", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		in, err := jobs.ParentResult[Items](ctx, "fetch")
		if err != nil {
			return nil, err
		}
		join := jobs.SpawnJob{Key: "sum", Type: "sum", Queue: "fan", DependsOn: []string{}}
		var specs []jobs.SpawnJob
		for _, it := range in.Items {
			k := fmt.Sprintf("square-%d", it)
			specs = append(specs, jobs.SpawnJob{Key: k, Type: "square", Queue: "fan", Payload: map[string]int{"n": it}, DependsOn: []string{jobs.Self}})
			join.DependsOn = append(join.DependsOn, k)
		}
		if err := jobs.Spawn(ctx, append(specs, join)...); err != nil {
			return nil, err
		}
		return map[string]int{"spawned": len(specs)}, nil
	}))
	b.registry.Register("square", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		var p struct{ N int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, err
		}
		if got, err := jobs.ParentResult[map[string]int](ctx, "split"); err != nil || got["spawned"] != n {
			return nil, fmt.Errorf("the spawner's result: %v, %v", got, err)
		}
		return p.N * p.N, nil
	}))
	b.registry.Register("sum", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
		total := 0
		parents := jobs.ParentsOf(ctx)
		for _, k := range parents.Keys() {
			v, err := jobs.ParentResult[int](ctx, k)
			if err != nil {
				return nil, err
			}
			total += v
		}
		sums <- total
		return map[string]int{"parents": len(parents), "sum": total}, nil
	}))
	_, err := b.store.Enqueue(b.ctx, workflowParams(t, b, "fan", [][]string{{"fetch", "fetch"}, {"split", "split", "fetch"}})...)
	require.NoError(t, err)
	b.start(t, workers.Config{Workers: 8, Queues: []string{"fan"}})
	select {
	case got := <-sums:
		want := 0
		for i := 1; i <= n; i++ {
			want += i * i
		}
		require.Equal(t, want, got)
	case <-b.ctx.Done():
		t.Fatal("the join never ran")
	}
	var squares, joins int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `
		SELECT count(*) FILTER (WHERE type = 'square' AND status = 'completed'), count(*) FILTER (WHERE type = 'sum')
		FROM jobs WHERE queue = 'fan'`).Scan(&squares, &joins))
	require.Equal(t, n, squares)
	require.Equal(t, 1, joins)
}

// workflowParams lays out a workflow of steps {key, type, deps...} in
// queue q, as POST /api/v1/workflows would.
func workflowParams(t *testing.T, b *testBundle, q string, steps [][]string) []jobs.EnqueueParams {
	t.Helper()
	ids := map[string]uuid.UUID{}
	for _, s := range steps {
		ids[s[0]] = uuid.Must(uuid.NewV7())
	}
	wf := uuid.Must(uuid.NewV7())
	out := make([]jobs.EnqueueParams, len(steps))
	for i, s := range steps {
		p := jobs.EnqueueParams{Type: s[1], Queue: q, ID: ids[s[0]], StepKey: s[0], WorkflowID: wf}
		for _, d := range s[2:] {
			p.DependsOn = append(p.DependsOn, ids[d])
		}
		require.NoError(t, p.Validate(b.registry, time.Now()))
		out[i] = p
	}
	return out
}

// TestSpawnOutsideAHandler: Spawn refuses to run outside a worker, and a
// spawned job that names an unknown type is refused at once.
func TestSpawnOutsideAHandler(t *testing.T) {
	t.Parallel()
	err := jobs.Spawn(context.Background(), jobs.SpawnJob{Key: "a", Type: "noop"})
	require.ErrorIs(t, err, jobs.ErrSpawnOutsideWorker)
	_, err = jobs.ParentResult[int](context.Background(), "a")
	require.True(t, errors.Is(err, jobs.ErrNoParent), "%v", err)
}

// TestPushCarriesParentsAndSpawns: a push endpoint receives the job's
// parents' results in the request body, and its 2xx answer's "spawn"
// list adds jobs to the workflow with the completion (the rest of the
// answer is the result); an answer spawning an unknown type fails the job
// for good with the reason, creating nothing.
func TestPushCarriesParentsAndSpawns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bodies := make(chan map[string]json.RawMessage, 10)
	ep := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(body, &m)
		bodies <- m
		var payload struct{ Spawn string }
		_ = json.Unmarshal(m["payload"], &payload)
		switch payload.Spawn {
		case "good":
			_, _ = w.Write([]byte(`{"resized": true, "spawn": [{"key": "publish", "type": "noop", "queue": "after", "depends_on": ["$self"]}]}`))
		case "bad":
			_, _ = w.Write([]byte(`{"spawn": [{"key": "x", "type": "no.such.type"}]}`))
		default:
			_, _ = w.Write([]byte(`{"url": "s3://img.png"}`))
		}
	})
	b.pushQueue(t, "hooks", ep.srv.URL)
	ps := workflowParams(t, b, "hooks", [][]string{{"fetch", "noop"}, {"resize", "noop", "fetch"}})
	ps[1].Payload = json.RawMessage(`{"spawn": "good"}`)
	_, err := b.store.Enqueue(b.ctx, ps...)
	require.NoError(t, err)
	bad := b.enqueue(t, "noop", `{"spawn": "bad"}`, func(p *jobs.EnqueueParams) { p.Queue = "hooks" })
	b.startPusher(t, workers.PusherConfig{Types: b.registry})

	first := b.waitFor(t, ps[0].ID, 30*time.Second, status(jobs.StateCompleted))
	require.JSONEq(t, `{"url": "s3://img.png"}`, string(first.Result))
	resize := b.waitFor(t, ps[1].ID, 30*time.Second, status(jobs.StateCompleted))
	require.JSONEq(t, `{"resized": true}`, string(resize.Result), "the spawn list is not part of the result")
	got := b.waitFor(t, bad.ID, 30*time.Second, status(jobs.StateDeadLetter))
	require.Contains(t, deref(got.LastError), "spawned jobs Flint refused")
	require.Contains(t, deref(got.LastError), "spawn[0].type")

	var sawParents bool
	for len(bodies) > 0 {
		m := <-bodies
		if string(m["id"]) == `"`+ps[1].ID.String()+`"` {
			require.JSONEq(t, `{"fetch": {"url": "s3://img.png"}}`, string(m["parents"]))
			sawParents = true
		}
	}
	require.True(t, sawParents, "resize was pushed with its parent's result")
	var publish []string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT array_agg(s.step_key) FROM jobs j JOIN workflow_steps s ON s.job_id = j.id WHERE j.queue = 'after'`).Scan(&publish))
	require.Equal(t, []string{"publish"}, publish)
	var strays int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM jobs WHERE type = 'no.such.type'`).Scan(&strays))
	require.Zero(t, strays)
}
