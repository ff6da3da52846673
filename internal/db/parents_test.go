package db_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// complete claims the job of queue q (the only one claimable there) and
// completes it with result.
func (b *testBundle) complete(t *testing.T, q string, result string, spawn ...jobs.Spawned) (*jobs.Job, domain.Moved) {
	t.Helper()
	got := b.claimQueue(t, q)
	require.Len(t, got, 1, "one job to run in queue %s", q)
	f := domain.Finish{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSucceeded, Spawn: spawn}
	if result != "" {
		f.Result = json.RawMessage(result)
	}
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{f})
	require.NoError(t, err)
	return got[0], moved[0]
}

func TestMaxParentsBytesSQL(t *testing.T) {
	require.Equal(t, strconv.Itoa(jobs.MaxParentsBytes), db.MaxParentsBytesSQL)
}

// TestClaimCarriesParentsResults: a child's claim holds each parent's
// result under its step key, a dependency outside the workflow under its
// id, null for a parent without a result; a job without dependencies has
// none, and so does a claim of it that reads nothing.
func TestClaimCarriesParentsResults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	outside := b.enqueue(t, jobs.EnqueueParams{Queue: "outside"})
	ids := b.workflow(t, [][]string{{"fetch"}, {"resize", "fetch"}, {"quiet"}})
	child := b.enqueue(t, jobs.EnqueueParams{Queue: "child", DependsOn: []uuid.UUID{ids["resize"], ids["quiet"], outside.ID}})
	require.True(t, child.HasParents)

	fetch := b.claimQueue(t, "wf")
	require.Len(t, fetch, 2, "fetch and quiet")
	for _, j := range fetch {
		require.Nil(t, j.Parents, "no dependencies, nothing read")
		res := json.RawMessage(`{"url":"s3://in.png","bytes":1234}`)
		if j.ID == ids["quiet"] {
			res = nil
		}
		_, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeSucceeded, Result: res}})
		require.NoError(t, err)
	}
	resize := b.claimQueue(t, "wf")
	require.Len(t, resize, 1)
	require.Equal(t, ids["resize"], resize[0].ID)
	require.JSONEq(t, `{"url":"s3://in.png","bytes":1234}`, string(resize[0].Parents["fetch"]))
	require.Equal(t, []string{"fetch"}, resize[0].Parents.Keys())
	_, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(resize[0]), Outcome: domain.OutcomeSucceeded,
		Result: json.RawMessage(`{"thumb":"s3://t.png"}`)}})
	require.NoError(t, err)
	b.complete(t, "outside", `[1,2,3]`)

	got := b.claimQueue(t, "child")
	require.Len(t, got, 1)
	p := got[0].Parents
	require.ElementsMatch(t, []string{"resize", "quiet", outside.ID.String()}, p.Keys(), "direct parents only: not fetch")
	require.JSONEq(t, `{"thumb":"s3://t.png"}`, string(p["resize"]))
	require.Equal(t, "null", string(p["quiet"]))
	require.JSONEq(t, "[1,2,3]", string(p[outside.ID.String()]))
}

// TestParentsBeyondTheBoundAreMarked: results are passed smallest first
// while they fit jobs.MaxParentsBytes; the others come as too_large with
// their size, and asking for one names it.
func TestParentsBeyondTheBoundAreMarked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	big := `{"blob":"` + strings.Repeat("x", 900_000) + `"}`
	var steps [][]string
	join := []string{"join"}
	for i := range 6 {
		k := fmt.Sprintf("p%d", i)
		steps = append(steps, []string{k})
		join = append(join, k)
	}
	ids := b.workflow(t, append(steps, join))
	for range 6 {
		got, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"wf"}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, got, 1)
		res := big
		if got[0].ID == ids["p0"] {
			res = `{"small":true}`
		}
		_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(got[0]), Outcome: domain.OutcomeSucceeded, Result: json.RawMessage(res)}})
		require.NoError(t, err)
	}
	got := b.claimQueue(t, "wf")
	require.Len(t, got, 1)
	p := got[0].Parents
	require.Len(t, p, 6)
	passed, marked := 0, 0
	for _, k := range p.Keys() {
		raw, err := p.Raw(k)
		var tl *jobs.ParentTooLargeError
		switch {
		case err == nil:
			passed++
		case errors.As(err, &tl):
			marked++
			require.Equal(t, k, tl.Key)
			require.InDelta(t, len(big), tl.Bytes, 2, "the size of the stored JSON text")
			require.Contains(t, err.Error(), k)
		default:
			t.Fatalf("parent %s: %v", k, err)
		}
		_ = raw
	}
	require.JSONEq(t, `{"small":true}`, string(p["p0"]), "the smallest is passed first")
	require.Equal(t, 1+(jobs.MaxParentsBytes-14)/len(big), passed, "as many as fit the bound")
	require.Equal(t, 6-passed, marked)
	_, err := p.Raw("nope")
	require.ErrorIs(t, err, jobs.ErrNoParent)
}

// TestSpawnGrowsTheWorkflow: a completion that spawns jobs creates them
// with it, in its workflow: a fan-out that waits for the spawner and a
// join that waits for the fan-out; the join reads every result.
func TestSpawnGrowsTheWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.workflow(t, [][]string{{"extract"}, {"report", "extract"}})
	var spawn []jobs.Spawned
	join := jobs.Spawned{Key: "sum", DependsOn: []string{jobs.Self}, Params: jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "join"}}
	for i := range 50 {
		k := fmt.Sprintf("row-%d", i)
		spawn = append(spawn, jobs.Spawned{Key: k, DependsOn: []string{jobs.Self},
			Params: jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "rows", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}})
		join.DependsOn = append(join.DependsOn, k)
	}
	spawn = append(spawn, join)
	_, m := b.complete(t, "wf", `{"rows":50}`, spawn...)
	require.Equal(t, jobs.StateCompleted, m.Status)

	rows, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{"rows"}, Limit: 100, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, rows, 50, "the fan-out runs at once: its only dependency completed")
	var fin []domain.Finish
	for _, r := range rows {
		require.JSONEq(t, `{"rows":50}`, string(r.Parents["extract"]), "the spawner by its step key")
		var in struct{ N int }
		require.NoError(t, json.Unmarshal(r.Payload, &in))
		fin = append(fin, domain.Finish{Lease: domain.LeaseOf(r), Outcome: domain.OutcomeSucceeded, Result: json.RawMessage(strconv.Itoa(in.N * 2))})
	}
	require.Empty(t, b.claimQueue(t, "join"), "the join waits for every row")
	_, _, err = b.store.FinishJobs(b.ctx, fin)
	require.NoError(t, err)
	got := b.claimQueue(t, "join")
	require.Len(t, got, 1)
	require.Len(t, got[0].Parents, 51)
	sum := 0
	for i := range 50 {
		v, err := strconv.Atoi(string(got[0].Parents[fmt.Sprintf("row-%d", i)]))
		require.NoError(t, err)
		sum += v
	}
	require.Equal(t, 2*49*50/2, sum)

	g, err := b.store.WorkflowGraph(b.ctx, ids["report"])
	require.NoError(t, err)
	require.Len(t, g.Steps, 53, "the graph holds what was spawned")
	waits := 0
	for _, e := range g.Edges {
		if e.DependsOn == ids["extract"] && !e.Spawned {
			waits++
		}
	}
	require.Equal(t, 1+50+1, waits, "report, every row and the join wait for extract")

	// The rows' dependency on their spawner, which had completed when they
	// were created, is their step row's (reads_spawner), not an edge; the
	// join, created blocked, has its edge. Every reader sees both alike.
	var edges, reading int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT
		(SELECT count(*) FROM job_dependencies WHERE depends_on_id = $1),
		(SELECT count(*) FROM workflow_steps WHERE spawned_by = $1 AND reads_spawner)`, ids["extract"]).Scan(&edges, &reading))
	require.Equal(t, []int{2, 50}, []int{edges, reading}, "report's and the join's edges; the rows' step rows")
	deps, err := b.store.Dependencies(b.ctx, ids["extract"])
	require.NoError(t, err)
	require.Len(t, deps.Downstream, 52)
	deps, err = b.store.Dependencies(b.ctx, rows[0].ID)
	require.NoError(t, err)
	require.Len(t, deps.Upstream, 1)
	require.Equal(t, ids["extract"], deps.Upstream[0].ID)
	data, err := b.store.JobData(b.ctx, rows[0])
	require.NoError(t, err)
	require.Len(t, data.Parents, 1)
	require.Equal(t, "extract", data.Parents[0].Key)

	// A key the workflow has already is refused, and the job fails for
	// good with the reason; nothing is spawned.
	_, m = b.complete(t, "wf", "", jobs.Spawned{Key: "row-3", Params: jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "again"}})
	require.Equal(t, jobs.StateDeadLetter, m.Status)
	j, err := b.store.GetJob(b.ctx, ids["report"])
	require.NoError(t, err)
	require.Contains(t, *j.LastError, `spawn refused: spawn[0].key: "row-3" already names a job of this workflow`)
	require.Empty(t, b.claimQueue(t, "again"))
}

// TestSpawnWithALostLeaseAddsNothing: a completion whose lease has moved
// on (the job was reaped and claimed again) spawns nothing, and the
// attempt that holds the lease spawns once.
func TestSpawnWithALostLeaseAddsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{Queue: "wf"})
	first := b.claimQueue(t, "wf")
	require.Len(t, first, 1)
	later := time.Now().Add(2 * time.Minute)
	_, err := b.store.ReapExpired(b.ctx, &later, 100)
	require.NoError(t, err)
	second := b.claimQueue(t, "wf")
	require.Len(t, second, 1)
	child := jobs.Spawned{Key: "child", DependsOn: []string{jobs.Self}, Params: jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "kids"}}
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(first[0]), Outcome: domain.OutcomeSucceeded, Spawn: []jobs.Spawned{child}}})
	require.NoError(t, err)
	require.True(t, moved[0].LeaseLost())
	require.Empty(t, b.claimQueue(t, "kids"), "the zombie spawned nothing")
	moved, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(second[0]), Outcome: domain.OutcomeSucceeded, Spawn: []jobs.Spawned{child}}})
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, moved[0].Status)
	require.Len(t, b.claimQueue(t, "kids"), 1)
}

// TestSpawnedJobsCascadeAndReArm: a spawned job that fails for good
// cancels the join spawned with it, as a submitted one would; replaying it
// re-arms the join, which then runs once the replay completes.
func TestSpawnedJobsCascadeAndReArm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, jobs.EnqueueParams{Queue: "wf"})
	spawn := []jobs.Spawned{
		{Key: "a", DependsOn: []string{jobs.Self}, Params: jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "rows"}},
		{Key: "join", DependsOn: []string{"a"}, Params: jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "join"}},
	}
	b.complete(t, "wf", "", spawn...)
	rows := b.claimQueue(t, "rows")
	require.Len(t, rows, 1)
	_, cascaded, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(rows[0]), Outcome: domain.OutcomeFailed, Final: true, Error: "boom"}})
	require.NoError(t, err)
	require.Len(t, cascaded, 1)
	require.Equal(t, jobs.StateCancelled, cascaded[0].Status, "the join is cancelled")
	join, err := b.store.GetJob(b.ctx, cascaded[0].JobID)
	require.NoError(t, err)
	require.Contains(t, *join.LastError, "failed permanently")

	_, err = b.store.RetryJob(b.ctx, rows[0].ID)
	require.NoError(t, err)
	join, err = b.store.GetJob(b.ctx, join.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateBlocked, join.Status, "re-armed by the replay")
	b.complete(t, "rows", `{"ok": true}`)
	got := b.claimQueue(t, "join")
	require.Len(t, got, 1)
	require.JSONEq(t, `{"ok": true}`, string(got[0].Parents["a"]))
}
