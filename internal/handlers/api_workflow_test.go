package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWorkflowAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post(t, "/api/v1/workflows", `{"jobs":[
		{"key":"fetch","type":"noop"},
		{"key":"resize","type":"noop","depends_on":["fetch"]},
		{"key":"index","type":"noop","depends_on":["fetch"]},
		{"key":"publish","type":"noop","depends_on":["resize","index"]}]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	out := r.json(t)["jobs"].([]any)
	require.Len(t, out, 4)
	byKey := map[string]map[string]any{}
	for _, j := range out {
		m := j.(map[string]any)
		byKey[m["key"].(string)] = m
	}
	require.Equal(t, "queued", byKey["fetch"]["status"])
	require.Equal(t, "blocked", byKey["publish"]["status"])

	d := b.do(t, http.MethodGet, "/api/v1/jobs/"+byKey["publish"]["id"].(string), "", "").json(t)
	up := d["dependencies"].(map[string]any)["upstream"].([]any)
	require.Len(t, up, 2)
	down := b.do(t, http.MethodGet, "/api/v1/jobs/"+byKey["fetch"]["id"].(string), "", "").json(t)["dependencies"].(map[string]any)["downstream"].([]any)
	require.Len(t, down, 2)

	// depends_on on a plain enqueue takes job ids.
	r = b.post(t, "/api/v1/jobs", `{"type":"noop","depends_on":["`+byKey["publish"]["id"].(string)+`"]}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, "blocked", r.json(t)["status"])
}

func TestWorkflowRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	many := `{"jobs":[` + strings.TrimSuffix(strings.Repeat(`{"key":"k","type":"noop"},`, 1001), ",") + `]}`
	cases := []struct {
		name, path, body, field, msg string
	}{
		{"cycle", "/api/v1/workflows", `{"jobs":[{"key":"a","type":"noop","depends_on":["c"]},{"key":"b","type":"noop","depends_on":["a"]},{"key":"c","type":"noop","depends_on":["b"]}]}`, "jobs", "a → c → b → a"},
		{"self edge", "/api/v1/workflows", `{"jobs":[{"key":"a","type":"noop","depends_on":["a"]}]}`, "jobs[0].depends_on[0]", "itself"},
		{"unknown key", "/api/v1/workflows", `{"jobs":[{"key":"a","type":"noop","depends_on":["zz"]}]}`, "jobs[0].depends_on[0]", "neither a key"},
		{"unknown id", "/api/v1/workflows", `{"jobs":[{"key":"a","type":"noop","depends_on":["0190a0a0-0000-7000-8000-000000000000"]}]}`, "depends_on[0]", "no job has id"},
		{"missing key", "/api/v1/workflows", `{"jobs":[{"type":"noop"}]}`, "jobs[0].key", "required"},
		{"duplicate key", "/api/v1/workflows", `{"jobs":[{"key":"a","type":"noop"},{"key":"a","type":"noop"}]}`, "jobs[1].key", "also the key"},
		{"oversized", "/api/v1/workflows", many, "jobs", "limit"},
		{"recurring in workflow", "/api/v1/workflows", `{"jobs":[{"key":"a","type":"noop","interval_seconds":5}]}`, "jobs[0].interval_seconds", "recurring"},
		{"key outside workflow", "/api/v1/jobs", `{"type":"noop","key":"a"}`, "key", "workflow"},
		{"bad dependency id", "/api/v1/jobs", `{"type":"noop","depends_on":["a"]}`, "depends_on[0]", "not a job id"},
		{"duplicate dependency", "/api/v1/jobs", `{"type":"noop","depends_on":["0190a0a0-0000-7000-8000-000000000000","0190a0a0-0000-7000-8000-000000000000"]}`, "depends_on[1]", "twice"},
		{"recurring with deps", "/api/v1/jobs", `{"type":"noop","interval_seconds":5,"depends_on":["0190a0a0-0000-7000-8000-000000000000"]}`, "depends_on", "recurring"},
		{"bad cron", "/api/v1/jobs", `{"type":"noop","cron":"every minute"}`, "cron", "cron"},
		{"bad timezone", "/api/v1/jobs", `{"type":"noop","cron":"0 * * * *","timezone":"Moon/Base"}`, "timezone", "time zone"},
		{"timezone without cron", "/api/v1/jobs", `{"type":"noop","timezone":"UTC"}`, "timezone", "cron"},
		{"interval and cron", "/api/v1/jobs", `{"type":"noop","interval_seconds":5,"cron":"* * * * *"}`, "cron", "not both"},
		{"interval zero", "/api/v1/jobs", `{"type":"noop","interval_seconds":0}`, "interval_seconds", "between"},
		{"interval absurd", "/api/v1/jobs", `{"type":"noop","interval_seconds":99999999999}`, "interval_seconds", "between"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := b.post(t, tc.path, tc.body)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s", r.body)
			e := r.json(t)["error"].(map[string]any)
			require.Equal(t, tc.field, e["field"], "%v", e)
			require.Contains(t, e["message"], tc.msg)
		})
	}
}

func TestRecurringAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.post(t, "/api/v1/jobs", `{"type":"noop","cron":"30 2 * * *","timezone":"America/Los_Angeles"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	sid := r.json(t)["schedule_id"].(string)
	list := b.do(t, http.MethodGet, "/api/v1/recurring", "", "").json(t)["recurring"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, "30 2 * * *", list[0].(map[string]any)["cron"])

	p := b.post(t, "/api/v1/recurring/"+sid+"/pause", "")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, true, p.json(t)["paused"])
	p = b.post(t, "/api/v1/recurring/"+sid+"/resume", "")
	require.Equal(t, false, p.json(t)["paused"])
	require.NotNil(t, p.json(t)["next_run_at"])
	run := b.post(t, "/api/v1/recurring/"+sid+"/run", "")
	require.Equal(t, http.StatusCreated, run.status)
	require.Equal(t, "queued", run.json(t)["status"])
	require.Equal(t, http.StatusNotFound, b.post(t, "/api/v1/recurring/0190a0a0-0000-7000-8000-000000000000/pause", "").status)
	require.Equal(t, http.StatusBadRequest, b.post(t, "/api/v1/recurring/nope/pause", "").status)
	del := b.do(t, http.MethodDelete, "/api/v1/recurring/"+sid, "", "")
	require.Equal(t, http.StatusOK, del.status)
	require.Equal(t, http.StatusNotFound, b.do(t, http.MethodGet, "/api/v1/recurring/"+sid, "", "").status)
}

func TestSettingsAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.do(t, http.MethodGet, "/api/v1/settings", "", "")
	require.Equal(t, http.StatusOK, g.status)
	require.Equal(t, "heap", g.json(t)["scheduler_strategy"])
	require.Equal(t, float64(5), g.json(t)["dlq_threshold"])

	patch := func(body string) response {
		return b.do(t, http.MethodPatch, "/api/v1/settings", "application/json", body)
	}
	r := patch(`{"scheduler_strategy":"timing_wheel","dlq_threshold":9,"alert_emails":["ops@example.com"]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, []any{"alert_emails", "dlq_threshold", "scheduler_strategy"}, r.json(t)["changed"])
	require.Equal(t, "timing_wheel", b.do(t, http.MethodGet, "/api/v1/settings", "", "").json(t)["scheduler_strategy"])

	for _, tc := range []struct{ name, body, field string }{
		{"unknown", `{"nope":1}`, "nope"},
		{"strategy", `{"scheduler_strategy":"fifo"}`, "scheduler_strategy"},
		{"threshold zero", `{"dlq_threshold":0}`, "dlq_threshold"},
		{"threshold type", `{"dlq_threshold":"5"}`, "dlq_threshold"},
		{"threshold absurd", `{"dlq_threshold":1e300}`, "dlq_threshold"},
		{"email", `{"alert_emails":["not-an-email"]}`, "alert_emails[0]"},
		{"email with name", `{"alert_emails":["Ops <ops@example.com>"]}`, "alert_emails[0]"},
		{"aging step", `{"aging_step":0}`, "aging_step"},
		{"aging floor", `{"aging_floor":0.5}`, "aging_floor"},
		{"retention", `{"retention_completed_days":-1}`, "retention_completed_days"},
		{"empty", `{}`, ""},
	} {
		r := patch(tc.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", tc.name, r.body)
		field, _ := r.json(t)["error"].(map[string]any)["field"].(string)
		require.Equal(t, tc.field, field, tc.name)
	}
	require.Equal(t, http.StatusBadRequest, patch(`[1]`).status)

	changes := b.do(t, http.MethodGet, "/api/v1/settings/changes", "", "").json(t)["changes"].([]any)
	require.Len(t, changes, 3)
	c := changes[0].(map[string]any)
	require.Contains(t, c["changed_by"], "key:FLINT_API_KEY@")
	require.NotNil(t, c["new_value"])
}
