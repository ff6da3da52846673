package handlers_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func TestBulkActions(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	a := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	c := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	form := url.Values{"action": {"cancel"}, "ids": {a.ID.String(), c.ID.String()}}
	p := b.hx(t, http.MethodPost, "/jobs/bulk", form, "jobs-table")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.header.Get("HX-Trigger"), "Cancelled: 2 of 2 jobs")
	for _, id := range []uuidT{a.ID, c.ID} {
		got, err := b.store.GetJob(b.ctx, id)
		require.NoError(t, err)
		require.Equal(t, jobs.StateCancelled, got.Status)
	}
	// Retrying cancelled jobs is refused, and the page says why.
	p = b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"retry"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "0 of 1")
	require.Contains(t, p.header.Get("HX-Trigger"), "cannot retry")
	for _, bad := range []url.Values{
		{"action": {"explode"}, "ids": {a.ID.String()}},
		{"action": {"cancel"}},
		{"action": {"cancel"}, "ids": {"nope"}},
	} {
		require.Equal(t, http.StatusUnprocessableEntity, b.hx(t, http.MethodPost, "/jobs/bulk", bad, "jobs-table").status)
	}
	// Delete to the bin, restore, delete again, purge.
	b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"delete"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, b.request(t, http.MethodGet, "/bin", nil).body, a.ID.String())
	p = b.hx(t, http.MethodPost, "/bin/bulk", url.Values{"action": {"restore"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "Restored: 1 of 1")
	b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"delete"}, "ids": {a.ID.String()}}, "jobs-table")
	p = b.hx(t, http.MethodPost, "/bin/bulk", url.Values{"action": {"purge"}, "ids": {a.ID.String()}}, "jobs-table")
	require.Contains(t, p.header.Get("HX-Trigger"), "Purged: 1 of 1")
	_, err := b.store.GetJob(b.ctx, a.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

func TestCreateFormValidation(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	cases := []struct {
		name  string
		form  url.Values
		field string
	}{
		{"bad payload", url.Values{"type": {"noop"}, "payload": {"{not json"}}, "payload"},
		{"payload array", url.Values{"type": {"noop"}, "payload": {"[1]"}}, "payload"},
		{"sleep needs ms", url.Values{"type": {"sleep"}, "payload": {"{}"}}, "payload"},
		{"unknown type", url.Values{"type": {"rm"}, "payload": {"{}"}}, "type"},
		{"retries", url.Values{"type": {"noop"}, "max_retries": {"-3"}}, "max_retries"},
		{"retries text", url.Values{"type": {"noop"}, "max_retries": {"three"}}, "max_retries"},
		{"cron", url.Values{"type": {"noop"}, "cron": {"soon"}}, "cron"},
		{"depends", url.Values{"type": {"noop"}, "depends_on": {"not-an-id"}}, "depends_on"},
		{"run_at", url.Values{"type": {"noop"}, "run_at": {"yesterday"}}, "run_at"},
		// What PostgreSQL cannot store, and nesting nobody can render.
		{"invalid utf-8", url.Values{"type": {"noop"}, "payload": {"{\"x\": \"\xff\"}"}}, "payload"},
		{"lone surrogate", url.Values{"type": {"noop"}, "payload": {`{"x": "\ud800"}`}}, "payload"},
		{"too deep", url.Values{"type": {"noop"}, "payload": {`{"a":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}`}}, "payload"},
	}
	for _, tc := range cases {
		p := b.hx(t, http.MethodPost, "/jobs/new", tc.form, "create-form")
		require.Equal(t, http.StatusUnprocessableEntity, p.status, tc.name)
		require.Contains(t, p.body, `data-testid="error-`+tc.field+`"`, tc.name+": "+p.body)
		require.Contains(t, p.body, `id="create-form"`)
	}
	// The values typed stay in the form.
	p := b.hx(t, http.MethodPost, "/jobs/new", url.Values{"type": {"sleep"}, "queue": {"kept-queue"}, "payload": {"{}"}}, "create-form")
	require.Contains(t, p.body, `value="kept-queue"`)

	p = b.hx(t, http.MethodPost, "/jobs/new", url.Values{"type": {"sleep"}, "payload": {`{"ms": 5}`}, "priority": {"high"},
		"queue": {"q1"}, "delay_seconds": {"60"}}, "create-form")
	require.Equal(t, http.StatusNoContent, p.status, p.body)
	loc := p.header.Get("HX-Redirect")
	require.True(t, strings.HasPrefix(loc, "/jobs/"), loc)
	got, err := b.store.GetJob(b.ctx, uuidMust(strings.TrimPrefix(loc, "/jobs/")))
	require.NoError(t, err)
	require.Equal(t, jobs.StateScheduled, got.Status)
	require.Equal(t, 1, got.Priority)
	require.Equal(t, "q1", got.Queue)
}

func TestSettingsForm(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	st := domain.DefaultSettings()
	form := url.Values{}
	for k, v := range st.Map() {
		form.Set(k, strings.Trim(string(v), `"[]`))
	}
	form.Set("dlq_threshold", "12")
	form.Set("alert_emails", "a@example.com, b@example.com")
	p := b.hx(t, http.MethodPost, "/settings", form, "settings")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "Saved: alert_emails, dlq_threshold.")
	got, err := b.store.GetSettings(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 12, got.DLQThreshold)
	require.Equal(t, []string{"a@example.com", "b@example.com"}, got.AlertEmails)
	changes, err := b.store.ListSettingsChanges(b.ctx, 5)
	require.NoError(t, err)
	require.Equal(t, adminEmail+"@0.0.0.0", changes[0].ChangedBy)

	form.Set("dlq_threshold", "0")
	p = b.hx(t, http.MethodPost, "/settings", form, "settings")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, `data-testid="error-dlq_threshold"`)
	for _, bad := range []string{"many", "NaN", "Inf", "-Infinity", "0x1p4", "1_000"} {
		form.Set("dlq_threshold", bad)
		p = b.hx(t, http.MethodPost, "/settings", form, "settings")
		require.Equal(t, http.StatusUnprocessableEntity, p.status, bad)
		require.Contains(t, p.body, "must be a number", bad)
	}
	form.Set("dlq_threshold", "+7")
	p = b.hx(t, http.MethodPost, "/settings", form, "settings")
	require.Equal(t, http.StatusOK, p.status, "a number however written")
	got, err = b.store.GetSettings(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 7, got.DLQThreshold)
}

func TestBenchmarkPageAndAPI(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	p := b.hx(t, http.MethodPost, "/benchmark", url.Values{"n": {"5000"}, "algorithm": {"both"}}, "bench")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `data-testid="bench-results"`)
	require.Contains(t, p.body, "<svg")
	p = b.hx(t, http.MethodPost, "/benchmark", url.Values{"n": {"5"}, "algorithm": {"both"}}, "bench")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	api := b.request(t, http.MethodPost, "/api/v1/benchmark/run", nil, "X-API-Key", apiKey)
	require.Equal(t, http.StatusOK, api.status, api.body)
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(api.body), &out))
	require.Equal(t, float64(10000), out["n"])
}

// TestAuditTrail: every operator action, from the API and from the
// dashboard, leaves an entry saying who, what, when and from where.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	api := func(method, path, body string) page {
		var form url.Values
		p := b.request(t, method, path, form, "X-API-Key", apiKey, "Content-Type", "application/json")
		_ = body
		return p
	}
	a := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	c := b.enqueue(t, jobs.EnqueueParams{Type: "noop"})
	series := b.enqueue(t, jobs.EnqueueParams{Type: "noop", IntervalSeconds: 3600})
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/jobs/"+a.ID.String()+"/cancel", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodDelete, "/api/v1/jobs/"+a.ID.String(), "").status)
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/jobs/"+a.ID.String()+"/restore", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodDelete, "/api/v1/jobs/"+a.ID.String(), "").status)
	require.Equal(t, http.StatusOK, api(http.MethodDelete, "/api/v1/jobs/"+a.ID.String()+"?purge=true", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/recurring/"+series.ScheduleID.String()+"/pause", "").status)
	require.Equal(t, http.StatusOK, api(http.MethodPost, "/api/v1/dlq/retry", "").status)
	// And from the dashboard.
	b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"cancel"}, "ids": {c.ID.String()}}, "jobs-table")
	form := url.Values{}
	for k, v := range domain.DefaultSettings().Map() {
		form.Set(k, strings.Trim(string(v), `"[]`))
	}
	form.Set("dlq_threshold", "9")
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/settings", form, "settings").status)
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series.ScheduleID.String()+"/run", nil, "recurring-table").status)

	entries, err := b.store.ListAudit(b.ctx, domain.AuditQuery{Limit: 100})
	require.NoError(t, err)
	got := map[string]domain.AuditEntry{}
	for _, e := range entries {
		got[e.Action+"/"+e.Source] = e
	}
	for _, want := range []string{"cancel/api", "delete/api", "restore/api", "purge/api", "series_pause/api", "dlq_replay/api",
		"cancel/dashboard", "settings_change/dashboard", "series_run_now/dashboard"} {
		e, ok := got[want]
		require.True(t, ok, "no audit entry for %s; have %v", want, got)
		require.NotEmpty(t, e.IP)
		require.False(t, e.At.IsZero())
	}
	require.Equal(t, "key:FLINT_API_KEY", got["cancel/api"].Actor)
	require.Equal(t, adminEmail, got["cancel/dashboard"].Actor)
	require.Equal(t, c.ID, *got["cancel/dashboard"].JobID)
	require.NotNil(t, got["series_run_now/dashboard"].JobID, "the occurrence it made is recorded, as from the API")
	require.JSONEq(t, `{"dlq_threshold": 9}`, string(got["settings_change/dashboard"].Details))

	// Shown on the job page, the Audit page and through the API.
	require.Contains(t, b.request(t, http.MethodGet, "/jobs/"+c.ID.String(), nil).body, `data-testid="audit-row"`)
	pageBody := b.request(t, http.MethodGet, "/audit", nil).body
	require.Contains(t, pageBody, "settings_change")
	list := api(http.MethodGet, "/api/v1/audit?job_id="+c.ID.String(), "")
	require.Equal(t, http.StatusOK, list.status)
	require.Contains(t, list.body, `"action":"cancel"`)
	require.Equal(t, http.StatusUnprocessableEntity, api(http.MethodGet, "/api/v1/audit?job_id=x", "").status)
}

// TestDashboardActionsWakeWorkers: what the dashboard makes ready wakes
// this process's workers at once, as the API does, and a database failure
// during an action is an error, not a refusal.
func TestDashboardActionsWakeWorkers(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	dead := func(queue string) *jobs.Job {
		j := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: queue, MaxRetries: new(int)})
		c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, c, 1)
		_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeFailed, Error: "boom"}})
		require.NoError(t, err)
		got, err := b.store.GetJob(b.ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, jobs.StateDeadLetter, got.Status)
		return got
	}
	b.woken.take()

	one := dead("mail")
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/jobs/"+one.ID.String()+"/retry", nil, "job-live").status)
	require.Equal(t, []string{"mail"}, b.woken.take(), "retry from the job page")

	dead("a")
	dead("a")
	dead("b")
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/dlq/replay-all", nil, "jobs-table").status)
	woken := b.woken.take()
	slices.Sort(woken)
	require.Equal(t, []string{"a", "b"}, woken, "replay all: once per queue")

	series := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: "cron", IntervalSeconds: 3600})
	require.Equal(t, http.StatusOK, b.hx(t, http.MethodPost, "/recurring/"+series.ScheduleID.String()+"/run", nil, "recurring-table").status)
	require.Equal(t, []string{"cron"}, b.woken.take(), "run now")

	// A refusal is a 409 with the reason; a broken database is a 500.
	p := b.hx(t, http.MethodPost, "/jobs/"+one.ID.String()+"/restore", nil, "job-live")
	require.Equal(t, http.StatusConflict, p.status)
	require.Contains(t, p.header.Get("HX-Trigger"), "Not possible")
	_, err := b.store.Pool().Exec(b.ctx, `ALTER TABLE jobs RENAME TO jobs_gone`)
	require.NoError(t, err)
	defer func() {
		_, err := b.store.Pool().Exec(b.ctx, `ALTER TABLE jobs_gone RENAME TO jobs`)
		require.NoError(t, err)
	}()
	p = b.hx(t, http.MethodPost, "/jobs/bulk", url.Values{"action": {"cancel"}, "ids": {one.ID.String()}}, "jobs-table")
	require.Equal(t, http.StatusInternalServerError, p.status)
	require.NotContains(t, p.header.Get("HX-Trigger"), "jobs_gone", "no internal error text in a toast")
}

// TestSignalsWakeWorkers: a signal that resumes a job wakes this process's
// workers for its queue at once, from the API and from the job page's
// form; one kept for a wait to come wakes nobody.
func TestSignalsWakeWorkers(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	waiting := func(queue string) *jobs.Job {
		j := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: queue})
		c, err := b.store.ClaimJobs(b.ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: 1, LeaseTTL: time.Minute})
		require.NoError(t, err)
		require.Len(t, c, 1)
		w := jobs.WaitingFor{Kind: jobs.WaitSignal, Name: "approval", Until: time.Now().Add(time.Hour)}
		_, _, err = b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.LeaseOf(c[0]), Outcome: domain.OutcomeSuspended, Wait: &w}})
		require.NoError(t, err)
		return j
	}
	b.woken.take()

	early := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: "early"})
	p := b.apiCall(t, http.MethodPost, "/api/v1/jobs/"+early.ID.String()+"/signals/approval", `{"body": 1}`, "application/json")
	require.Equal(t, http.StatusAccepted, p.status, p.body)
	require.Contains(t, p.body, `"resumed":false`)
	require.Empty(t, b.woken.take(), "kept for a wait to come: nothing to run yet")

	api := waiting("refunds")
	p = b.apiCall(t, http.MethodPost, "/api/v1/jobs/"+api.ID.String()+"/signals/approval", `{"body": {"by": "ann"}}`, "application/json")
	require.Equal(t, http.StatusAccepted, p.status, p.body)
	require.Contains(t, p.body, `"resumed":true`)
	require.Equal(t, []string{"refunds"}, b.woken.take(), "the API's signal")

	form := waiting("approvals")
	p = b.hx(t, http.MethodPost, "/jobs/"+form.ID.String()+"/signal", url.Values{"name": {"approval"}, "body": {`{"by": "bob"}`}}, "job-live")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Equal(t, []string{"approvals"}, b.woken.take(), "the job page's form")
	got, err := b.store.GetJob(b.ctx, form.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, got.Status)
}
