package handlers_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// dataClaim is a claim's answer with the parents' results.
type dataClaim struct {
	Jobs []struct {
		ID         uuid.UUID                  `json:"id"`
		Type       string                     `json:"type"`
		LeaseToken uuid.UUID                  `json:"lease_token"`
		Parents    map[string]json.RawMessage `json:"parents"`
	} `json:"jobs"`
}

// TestPullWorkerReadsParentsAndSpawns: over the pull API, a child's claim
// carries its parent's result under the parent's step key; a completion
// that spawns a fan-out and a join creates them with it, in the workflow,
// the join reading every fanned-out result; a job without parents has no
// parents field.
func TestPullWorkerReadsParentsAndSpawns(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	w := r.register(t, apiKey, `{"name": "py", "types": ["noop"], "queues": ["wf"]}`)
	var wf struct {
		Jobs []struct {
			Key string    `json:"key"`
			ID  uuid.UUID `json:"id"`
		} `json:"jobs"`
	}
	require.Equal(t, http.StatusCreated, r.call(t, apiKey, http.MethodPost, "/api/v1/workflows",
		`{"jobs": [{"key": "fetch", "type": "noop", "queue": "wf"}, {"key": "split", "type": "noop", "queue": "wf", "depends_on": ["fetch"]}]}`, &wf))

	claim := func(n int) dataClaim {
		t.Helper()
		var c dataClaim
		require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/claim", fmt.Sprintf(`{"max": %d}`, n), &c))
		return c
	}
	finish := func(outcomes ...map[string]any) []map[string]any {
		t.Helper()
		var out struct {
			Outcomes []map[string]any `json:"outcomes"`
		}
		require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/finish", map[string]any{"outcomes": outcomes}, &out))
		return out.Outcomes
	}

	c := claim(10)
	require.Len(t, c.Jobs, 1)
	require.Nil(t, c.Jobs[0].Parents, "fetch has no parents")
	finish(map[string]any{"job_id": c.Jobs[0].ID, "lease_token": c.Jobs[0].LeaseToken, "status": "completed",
		"result": map[string]any{"items": []int{1, 2, 3}}})

	c = claim(10)
	require.Len(t, c.Jobs, 1)
	split := c.Jobs[0]
	require.JSONEq(t, `{"items": [1, 2, 3]}`, string(split.Parents["fetch"]))

	var spawn []map[string]any
	join := []string{}
	for i := 1; i <= 3; i++ {
		k := fmt.Sprintf("square-%d", i)
		spawn = append(spawn, map[string]any{"key": k, "type": "noop", "queue": "wf", "payload": map[string]int{"n": i}, "depends_on": []string{"$self"}})
		join = append(join, k)
	}
	spawn = append(spawn, map[string]any{"key": "sum", "type": "noop", "queue": "wf", "depends_on": join, "priority": "high"})
	out := finish(map[string]any{"job_id": split.ID, "lease_token": split.LeaseToken, "status": "completed", "spawn": spawn})
	require.Equal(t, true, out[0]["ok"])
	require.Equal(t, "completed", out[0]["status"])

	c = claim(10)
	require.Len(t, c.Jobs, 3, "the fan-out, released by its spawner's completion")
	for _, j := range c.Jobs {
		require.Equal(t, []string{"split"}, keys(j.Parents), "each square reads its spawner")
		var payload struct{ N int }
		require.NoError(t, json.Unmarshal(r.job(t, j.ID).Payload, &payload))
		finish(map[string]any{"job_id": j.ID, "lease_token": j.LeaseToken, "status": "completed", "result": payload.N * payload.N})
	}
	c = claim(10)
	require.Len(t, c.Jobs, 1)
	require.Equal(t, 1, r.job(t, c.Jobs[0].ID).Priority)
	require.Equal(t, []string{"square-1", "square-2", "square-3"}, keys(c.Jobs[0].Parents))
	sum := 0
	for _, v := range c.Jobs[0].Parents {
		var n int
		require.NoError(t, json.Unmarshal(v, &n))
		sum += n
	}
	require.Equal(t, 14, sum)
}

// TestPullWorkerSpawnRefusals: a spawn that cannot be checked against the
// wire's rules is refused whole (422 naming the field; nothing applied,
// the job still held); one the store refuses (a key the workflow has)
// fails the job for good with the reason and creates nothing.
func TestPullWorkerSpawnRefusals(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	w := r.register(t, apiKey, `{"name": "py", "types": ["noop"], "queues": ["sp"]}`)
	r.enqueue(t, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "sp"}, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "sp"})
	var c dataClaim
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/claim", `{"max": 2}`, &c))
	require.Len(t, c.Jobs, 2)
	j := c.Jobs[0]
	cases := []struct {
		name, spawn, field, msg string
	}{
		{"cycle", `[{"key":"a","type":"noop","depends_on":["b"]},{"key":"b","type":"noop","depends_on":["a"]}]`, "spawn", "cycle"},
		{"unknown type", `[{"key":"a","type":"no.such.type"}]`, "spawn[0].type", "unknown job type"},
		{"reserved key", `[{"key":"$x","type":"noop"}]`, "spawn[0].key", "reserved"},
		{"missing key", `[{"type":"noop"}]`, "spawn[0].key", "required"},
		{"unknown field", `[{"key":"a","type":"noop","colour":"red"}]`, "spawn[0].colour", "not a field"},
		{"bad dependency", `[{"key":"a","type":"noop","depends_on":["$parent"]}]`, "spawn[0].depends_on[0]", "$self"},
		{"duplicate key", `[{"key":"a","type":"noop"},{"key":"a","type":"noop"}]`, "spawn[1].key", "also the key"},
		{"bad payload", `[{"key":"a","type":"noop","payload":[1]}]`, "spawn[0].payload", "object"},
		{"not a list", `{"key":"a"}`, "spawn", "list"},
		{"over the limit", "[" + strings.TrimSuffix(strings.Repeat(`{"key":"k","type":"noop"},`, jobs.MaxSpawnJobs+1), ",") + "]", "spawn", "limit"},
		{"on a failure", "", "spawn", "completed outcomes only"},
	}
	for _, tc := range cases {
		o := fmt.Sprintf(`{"job_id":%q,"lease_token":%q,"status":"completed","spawn":%s}`, j.ID, j.LeaseToken, tc.spawn)
		if tc.spawn == "" {
			o = fmt.Sprintf(`{"job_id":%q,"lease_token":%q,"status":"failed","spawn":[{"key":"a","type":"noop"}]}`, j.ID, j.LeaseToken)
		}
		var e errBody
		require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/finish", `{"outcomes":[`+o+`]}`, &e), tc.name)
		require.Equal(t, "outcomes[0]."+tc.field, e.Error.Field, tc.name)
		require.Contains(t, e.Error.Message, tc.msg, tc.name)
	}
	require.Equal(t, jobs.StateRunning, r.job(t, j.ID).Status, "nothing was applied")

	// A key already in the workflow: the job, outside any workflow,
	// starts one (named by its id) with its spawn "a"; when "a" spawns
	// another "a" into that workflow, the store refuses the key.
	var out struct {
		Outcomes []map[string]any `json:"outcomes"`
	}
	o := fmt.Sprintf(`{"job_id":%q,"lease_token":%q,"status":"completed","spawn":[{"key":"a","type":"noop","queue":"sp","depends_on":["$self"]}]}`, j.ID, j.LeaseToken)
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/finish", `{"outcomes":[`+o+`]}`, &out))
	require.Equal(t, "completed", out.Outcomes[0]["status"])
	var d dataClaim
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/claim", `{"max": 1}`, &d))
	require.Len(t, d.Jobs, 1)
	a := d.Jobs[0]
	o = fmt.Sprintf(`{"job_id":%q,"lease_token":%q,"status":"completed","spawn":[{"key":"a","type":"noop","queue":"sp"}]}`, a.ID, a.LeaseToken)
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+w+"/finish", `{"outcomes":[`+o+`]}`, &out))
	require.Equal(t, "dead_letter", out.Outcomes[0]["status"], "the store refused the key")
	require.Contains(t, *r.job(t, a.ID).LastError, `"a" already names a job of this workflow`)
	var n int
	require.NoError(t, r.store.Pool().QueryRow(r.ctx, `SELECT count(*) FROM jobs WHERE queue = 'sp'`).Scan(&n))
	require.Equal(t, 3, n, "the two jobs and the one spawn that held")
}

func keys(m map[string]json.RawMessage) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
